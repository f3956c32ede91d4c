// oneDNN's depthwise post-op (post_ops::append_dw) on mobilenet_v2's inverted-residual blocks: a
// 1x1 expand convolution (+bias, relu6) followed by a 3x3 depthwise convolution (+bias, relu6),
// run as two primitives ("separate") or as one 1x1 primitive that carries the depthwise one as a
// post-op ("fused", the expanded tensor never leaves the cache). For each block shape, batch,
// thread count and activation layout (nChw16c, nChw8c, nhwc) it prints the implementations oneDNN
// picked, the best wall and process CPU time per call of each (interleaved rounds, so load from
// other jobs on a shared machine hits both alike) and the largest difference between the fused
// and the separate outputs. It uses oneDNN alone (no Lathe code), so it also builds standalone:
//   g++ -std=c++20 -O2 -fopenmp bench/bench_dw_fusion.cpp -ldnnl
// What it showed with oneDNN 2.6 on a Zen 4 (AVX-512), 2026-12-05: a real fused kernel
// (jit_1x1:avx512_core) exists only on nChw16c, and there only at batch 8 (batch 1 with one
// thread); nChw8c always gets ref_fused_convolution (the two primitives one after the other, no
// gain); on nhwc the fused jit kernel returns wrong outputs (unwritten / wrong elements). The
// fusion beats the fastest separate pair only on the 112x112 stride-2 blocks at batch 8.
// Usage: bench_dw_fusion [rounds (default 15)] [min_ms_per_round (default 20)]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <vector>

using Clock = std::chrono::steady_clock;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

namespace {

double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Times {
  std::vector<double> wall, cpu;
};

// Best wall / CPU time per call of each function, in `rounds` interleaved rounds of at least
// `min_s` each.
Times best_of_interleaved(const std::vector<std::function<void()>>& fs, int rounds, double min_s) {
  for (int i = 0; i < 3; ++i)
    for (const auto& f : fs) f();
  Times t{std::vector<double>(fs.size(), 1e30), std::vector<double>(fs.size(), 1e30)};
  for (int r = 0; r < rounds; ++r) {
    for (size_t k = 0; k < fs.size(); ++k) {
      int64_t iters = 0;
      const auto t0 = Clock::now();
      const double c0 = cpu_seconds();
      double el = 0;
      do {
        fs[k]();
        ++iters;
        el = std::chrono::duration<double>(Clock::now() - t0).count();
      } while (el < min_s);
      const double n = static_cast<double>(iters);
      t.wall[k] = std::min(t.wall[k], el / n);
      t.cpu[k] = std::min(t.cpu[k], (cpu_seconds() - c0) / n);
    }
  }
  return t;
}

struct Block {
  const char* name;
  int64_t c_in, c_mid, h, w, dw_stride;
};

struct Layout {
  const char* name;
  tag t;
};

std::vector<float> random_vector(size_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// A memory of descriptor `md` holding `user` (given in the plain layout `user_tag` with `dims`).
dnnl::memory reordered(const dnnl::engine& eng, dnnl::stream& s, std::vector<float>& user,
                       const dnnl::memory::dims& dims, tag user_tag, const dnnl::memory::desc& md) {
  dnnl::memory src({dims, dt::f32, user_tag}, eng, user.data());
  dnnl::memory dst(md, eng);
  dnnl::reorder(src, dst).execute(s, src, dst);
  s.wait();
  return dst;
}

// Reads a memory back as plain nchw.
std::vector<float> to_nchw(const dnnl::engine& eng, dnnl::stream& s, const dnnl::memory& m) {
  const auto dims = m.get_desc().dims();
  std::vector<float> out(static_cast<size_t>(dims[0] * dims[1] * dims[2] * dims[3]));
  dnnl::memory plain({dims, dt::f32, tag::nchw}, eng, out.data());
  dnnl::memory src = m;
  dnnl::reorder(src, plain).execute(s, src, plain);
  s.wait();
  return out;
}

// One block on one layout: the two separate primitives and the fused one, with their data.
struct LayoutRun {
  std::string separate_impl, fused_impl, note;
  bool fused_ok = false;  // a fused primitive exists and its output matches the separate one
  double max_diff = 0, max_out = 0;
  std::function<void()> separate, fused;
};

std::shared_ptr<LayoutRun> make_layout_run(const dnnl::engine& eng, dnnl::stream& s, const Block& b,
                                           int64_t n, const Layout& lay) {
  auto run = std::make_shared<LayoutRun>();
  std::mt19937 rng(1234);
  const int64_t oh = (b.h + 2 - 3) / b.dw_stride + 1, ow = (b.w + 2 - 3) / b.dw_stride + 1;
  const dnnl::memory::dims src_dims{n, b.c_in, b.h, b.w}, mid_dims{n, b.c_mid, b.h, b.w},
      out_dims{n, b.c_mid, oh, ow}, w1_dims{b.c_mid, b.c_in, 1, 1}, wdw_dims{b.c_mid, 1, 1, 3, 3},
      bias_dims{b.c_mid};
  auto x = random_vector(static_cast<size_t>(n * b.c_in * b.h * b.w), rng, 1.f);
  auto w1 = random_vector(static_cast<size_t>(b.c_mid * b.c_in), rng, 0.5f);
  auto b1 =
      std::make_shared<std::vector<float>>(random_vector(static_cast<size_t>(b.c_mid), rng, 0.5f));
  auto wdw = random_vector(static_cast<size_t>(b.c_mid * 9), rng, 0.5f);
  auto bdw =
      std::make_shared<std::vector<float>>(random_vector(static_cast<size_t>(b.c_mid), rng, 0.5f));

  const dnnl::memory::desc src_md(src_dims, dt::f32, lay.t), mid_md(mid_dims, dt::f32, lay.t),
      out_md(out_dims, dt::f32, lay.t), bias_md(bias_dims, dt::f32, tag::x);
  const dnnl::memory::desc w1_any(w1_dims, dt::f32, tag::any), wdw_any(wdw_dims, dt::f32, tag::any);
  const auto fwd = dnnl::prop_kind::forward_inference;
  const auto direct = dnnl::algorithm::convolution_direct;
  const auto relu6 = dnnl::algorithm::eltwise_clip;

  // Separate: 1x1 + relu6, then depthwise 3x3 + relu6.
  dnnl::post_ops po_act;
  po_act.append_eltwise(1.f, relu6, 0.f, 6.f);
  dnnl::primitive_attr attr_act;
  attr_act.set_post_ops(po_act);
  dnnl::convolution_forward::primitive_desc pw_pd(
      {fwd, direct, src_md, w1_any, bias_md, mid_md, {1, 1}, {0, 0}, {0, 0}}, attr_act, eng);
  dnnl::convolution_forward::primitive_desc dw_pd(
      {fwd, direct, mid_md, wdw_any, bias_md, out_md, {b.dw_stride, b.dw_stride}, {1, 1}, {1, 1}},
      attr_act, eng);
  run->separate_impl = std::string(pw_pd.impl_info_str()) + " + " + dw_pd.impl_info_str();
  dnnl::memory src = reordered(eng, s, x, src_dims, tag::nchw, src_md);
  dnnl::memory w1_mem = reordered(eng, s, w1, w1_dims, tag::oihw, pw_pd.weights_desc());
  dnnl::memory b1_mem(bias_md, eng, b1->data());
  dnnl::memory wdw_mem = reordered(eng, s, wdw, wdw_dims, tag::goihw, dw_pd.weights_desc());
  dnnl::memory bdw_mem(bias_md, eng, bdw->data());
  dnnl::memory mid(mid_md, eng), out_sep(out_md, eng);
  dnnl::convolution_forward pw(pw_pd), dw(dw_pd);
  dnnl::stream* sp = &s;
  run->separate = [=] {
    pw.execute(*sp, {{DNNL_ARG_SRC, src},
                     {DNNL_ARG_WEIGHTS, w1_mem},
                     {DNNL_ARG_BIAS, b1_mem},
                     {DNNL_ARG_DST, mid}});
    dw.execute(*sp, {{DNNL_ARG_SRC, mid},
                     {DNNL_ARG_WEIGHTS, wdw_mem},
                     {DNNL_ARG_BIAS, bdw_mem},
                     {DNNL_ARG_DST, out_sep}});
    sp->wait();
    (void)b1, (void)bdw;  // keep the bias buffers alive
  };

  // Fused: the 1x1 primitive (its dst descriptor is the expanded tensor's) with post-ops
  // relu6, depthwise 3x3 (stride 1 or 2, padding 1), relu6.
  dnnl::post_ops po_fused;
  po_fused.append_eltwise(1.f, relu6, 0.f, 6.f);
  po_fused.append_dw(dt::f32, dt::f32, dt::f32, 3, b.dw_stride, 1, 0, {});
  po_fused.append_eltwise(1.f, relu6, 0.f, 6.f);
  dnnl::primitive_attr attr_fused;
  attr_fused.set_post_ops(po_fused);
  dnnl::convolution_forward::primitive_desc fused_pd;
  try {
    fused_pd = dnnl::convolution_forward::primitive_desc(
        {fwd, direct, src_md, w1_any, bias_md, mid_md, {1, 1}, {0, 0}, {0, 0}}, attr_fused, eng);
    run->fused_impl = fused_pd.impl_info_str();
  } catch (const dnnl::error& e) {
    run->fused_impl = "-";
    run->note = std::string("no fused primitive: ") + e.what();
    return run;
  }
  const auto fused_dst_md = fused_pd.dst_desc();
  if (fused_dst_md != out_md) {
    run->note = "fused dst is not the depthwise output in this layout";
    return run;
  }
  const auto fused_wdw_md =
      fused_pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS);
  dnnl::memory fw1_mem = reordered(eng, s, w1, w1_dims, tag::oihw, fused_pd.weights_desc());
  dnnl::memory fwdw_mem = reordered(eng, s, wdw, wdw_dims, tag::goihw, fused_wdw_md);
  dnnl::memory out_fused(fused_dst_md, eng);
  dnnl::convolution_forward fused_prim(fused_pd);
  run->fused = [=] {
    fused_prim.execute(*sp, {{DNNL_ARG_SRC, src},
                             {DNNL_ARG_WEIGHTS, fw1_mem},
                             {DNNL_ARG_BIAS, b1_mem},
                             {DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS, fwdw_mem},
                             {DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS, bdw_mem},
                             {DNNL_ARG_DST, out_fused}});
    sp->wait();
  };
  run->separate();
  run->fused();
  const auto ref = to_nchw(eng, s, out_sep), got = to_nchw(eng, s, out_fused);
  for (size_t i = 0; i < ref.size(); ++i) {
    run->max_diff = std::max(run->max_diff, static_cast<double>(std::fabs(ref[i] - got[i])));
    run->max_out = std::max(run->max_out, static_cast<double>(std::fabs(ref[i])));
  }
  run->fused_ok = run->max_diff <= 1e-4 * std::max(1.0, run->max_out);
  if (!run->fused_ok) run->note = "fused output WRONG";
  return run;
}

// One summary line per row group: the fastest separate pair against the fastest real fusion.
std::vector<std::string>& summary() {
  static std::vector<std::string> lines;
  return lines;
}

// All layouts of one block, batch and thread count, timed in one interleaved loop.
void run_case(const dnnl::engine& eng, const Block& b, int64_t n, int threads,
              const std::vector<Layout>& layouts, int rounds, double min_s) {
  omp_set_num_threads(threads);  // before the primitives are made: oneDNN plans for it
  dnnl::stream s(eng);
  std::vector<std::shared_ptr<LayoutRun>> runs;
  std::vector<std::function<void()>> fs;
  for (const Layout& lay : layouts) {
    runs.push_back(make_layout_run(eng, s, b, n, lay));
    fs.push_back(runs.back()->separate);
    if (runs.back()->fused) fs.push_back(runs.back()->fused);
  }
  const Times t = best_of_interleaved(fs, rounds, min_s);
  size_t k = 0;
  double best_sep = 1e30, best_fused = 1e30;
  const char *best_sep_layout = "-", *best_fused_layout = "-";
  for (size_t i = 0; i < layouts.size(); ++i) {
    const LayoutRun& r = *runs[i];
    const double sep = t.wall[k], sep_cpu = t.cpu[k];
    ++k;
    if (sep < best_sep) best_sep = sep, best_sep_layout = layouts[i].name;
    std::printf("| %s | %lld | %d | %s | %s | %s | %.3f |", b.name, static_cast<long long>(n),
                threads, layouts[i].name, r.separate_impl.c_str(), r.fused_impl.c_str(), sep * 1e3);
    if (r.fused) {
      const double fu = t.wall[k], fu_cpu = t.cpu[k];
      ++k;
      // Only a real (jit) fusion with a correct output counts as an alternative.
      if (r.fused_ok && r.fused_impl.rfind("ref", 0) != 0 && fu < best_fused)
        best_fused = fu, best_fused_layout = layouts[i].name;
      std::printf(" %.3f | %.2fx | %.2fx | %.1e | %s |\n", fu * 1e3, sep / fu, sep_cpu / fu_cpu,
                  r.max_diff, r.note.c_str());
    } else {
      std::printf(" - | - | - | - | %s |\n", r.note.c_str());
    }
  }
  char line[256];
  std::snprintf(line, sizeof line, "| %s | %lld | %d | %s %.3f | %s %.3f | %.2fx |\n", b.name,
                static_cast<long long>(n), threads, best_sep_layout, best_sep * 1e3,
                best_fused_layout, best_fused < 1e30 ? best_fused * 1e3 : 0.0,
                best_fused < 1e30 ? best_sep / best_fused : 0.0);
  summary().push_back(line);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 15;
  const double min_s = (argc > 2 ? std::atof(argv[2]) : 10.0) * 1e-3;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  const std::vector<Block> blocks{
      {"16->96 @112, dw s2", 16, 96, 112, 112, 2},
      {"24->144 @56, dw s1", 24, 144, 56, 56, 1},
      {"24->144 @56, dw s2", 24, 144, 56, 56, 2},
      {"32->192 @28, dw s1", 32, 192, 28, 28, 1},
      {"64->384 @14, dw s1", 64, 384, 14, 14, 1},
      // mnasnet1_0's 3x3 blocks 16->48, 24->72, 80->480; its 40->240 @28 block is 5x5 (no
      // depthwise post-op for that), timed here as 3x3 for the shape
      {"16->48 @112, dw s2", 16, 48, 112, 112, 2},
      {"24->72 @56, dw s1", 24, 72, 56, 56, 1},
      {"40->240 @28, dw s2", 40, 240, 28, 28, 2},
      {"80->480 @14, dw s1", 80, 480, 14, 14, 1},
  };
  const std::vector<Layout> layouts{
      {"nChw16c", tag::nChw16c}, {"nChw8c", tag::nChw8c}, {"nhwc", tag::nhwc}};
  std::printf(
      "1x1 conv + relu6 then 3x3 depthwise conv + relu6: separate primitives vs one with the "
      "depthwise post-op; best of %d interleaved rounds of >= %.0f ms (all six variants of a "
      "row group interleaved)\n\n",
      rounds, min_s * 1e3);
  std::printf(
      "| block | batch | threads | layout | separate impls | fused impl | separate ms | fused ms "
      "| wall speedup | CPU-time speedup | max abs diff | note |\n"
      "| --- | ---: | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n");
  for (const Block& b : blocks)
    for (int64_t n : {1, 8})
      for (int threads : {1, 2}) run_case(eng, b, n, threads, layouts, rounds, min_s);
  std::printf(
      "\nFastest separate pair (any layout) against the fastest real fusion (a jit kernel, "
      "correct output), wall ms:\n\n| block | batch | threads | best separate | best fused | "
      "speedup |\n| --- | ---: | ---: | --- | --- | ---: |\n");
  for (const std::string& l : summary()) std::fputs(l.c_str(), stdout);
  return 0;
}
