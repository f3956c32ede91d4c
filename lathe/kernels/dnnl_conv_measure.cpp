// Measured layout and algorithm choices for oneDNN convolutions: channels-last against the
// blocked layouts, reorder costs, Winograd against direct, each timed once on probe tensors and
// kept in the measurement cache (lathe/kernels/measure_cache.h).
#include "lathe/kernels/dnnl_conv.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>
#include "lathe/core/threads.h"
#include "lathe/kernels/blocked_layout.h"
#include "lathe/kernels/compile_time.h"
#include "lathe/kernels/dnnl_common.h"
#include "lathe/kernels/measure_cache.h"

namespace lathe::detail {
namespace {

using dnnl::memory;

// A probe's f32 tensor of the given layout, filled with a fixed pattern times `scale`.
Tensor probe_tensor(const Shape& sizes, const Shape& strides, float scale) {
  Tensor t = empty_strided(sizes, strides, DType::f32);
  float* p = static_cast<float*>(t.raw_data());
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = scale * static_cast<float>((i * 7919) % 201 - 100) / 100.0f;
  return t;
}

// The best wall times of `rounds` alternating runs of a and b (after three warm-up runs each:
// primitives made, weights reordered), in seconds.
std::pair<double, double> best_alternating(const std::function<void()>& a,
                                           const std::function<void()>& b, int rounds) {
  auto time_one = [](const std::function<void()>& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int i = 0; i < 3; ++i) a(), b();
  double ta = 1e30, tb = 1e30;
  for (int i = 0; i < rounds; ++i) {
    ta = std::min(ta, time_one(a));
    tb = std::min(tb, time_one(b));
  }
  return {ta, tb};
}

}  // namespace

int dnnl_preferred_conv_block() {
  static const int block = [] {
    // A mid-sized 3x3 convolution (resnet's 64 -> 64 at 56x56) with every layout left to oneDNN:
    // the source layout it picks is the one its fastest kernel for this machine reads.
    const memory::dims src_dims{1, 64, 56, 56}, dst_dims{1, 64, 56, 56}, w_dims{64, 64, 3, 3};
    const memory::desc src(src_dims, memory::data_type::f32, memory::format_tag::any);
    const memory::desc dst(dst_dims, memory::data_type::f32, memory::format_tag::any);
    const memory::desc wd(w_dims, memory::data_type::f32, memory::format_tag::any);
    try {
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                        dnnl::algorithm::convolution_direct, src, wd, dst, {1, 1},
                                        {1, 1}, {1, 1});
      dnnl::convolution_forward::primitive_desc pd(d, dnnl_engine());
      const auto& blk = pd.src_desc().data.format_desc.blocking;
      if (pd.src_desc().data.format_kind != dnnl_blocked || blk.inner_nblks != 1 ||
          blk.inner_idxs[0] != 1)
        return 0;
      const int64_t b = blk.inner_blks[0];
      return b == 8 || b == 16 ? static_cast<int>(b) : 0;
    } catch (const dnnl::error&) {
      return 0;
    }
  }();
  return block;
}

const ConvLayoutChoice& dnnl_measured_conv_layout() {
  static const ConvLayoutChoice choice = [] {
    ConvLayoutChoice c;
    c.preferred_block = dnnl_preferred_conv_block();
    if (c.preferred_block == 0) return c;
    const int64_t B = c.preferred_block, C = 64, H = 28;
    const Shape x4 = to_shape({1, C, H, H});
    const Shape cl = to_shape({H * H * C, 1, H * C, C});  // channels-last strides
    const Shape xb = to_shape({1, C / B, H, H, B});
    Tensor x = probe_tensor(x4, cl, 1.0f), y = probe_tensor(x4, cl, 0.0f);
    Tensor xblk = probe_tensor(xb, contiguous_strides(xb), 1.0f),
           yblk = probe_tensor(xb, contiguous_strides(xb), 0.0f);
    Tensor w =
        probe_tensor(to_shape({C, C, 3, 3}), contiguous_strides(to_shape({C, C, 3, 3})), 0.05f);
    Tensor b = probe_tensor(to_shape({C}), to_shape({1}), 0.1f);
    Conv2dParams p;
    p.padding[0] = p.padding[1] = 1;
    ConvPostOps post;
    post.act = ConvPostOps::Act::relu;
    const std::string key = "conv_layout block " + std::to_string(B);
    if (auto v = MeasureCache::current().load(key); v && v->size() == 2) {
      c.channels_last_s = (*v)[0];
      c.blocked_s = (*v)[1];
    } else {
      ProbeTimer timer;
      std::tie(c.channels_last_s, c.blocked_s) =
          best_alternating([&] { conv2d_forward(x, w, b, p, y, post); },
                           [&] { conv2d_forward_blocked(xblk, w, b, p, yblk, post); }, 9);
      MeasureCache::current().store(key, {c.channels_last_s, c.blocked_s});
    }
    // Blocked regions pay reorders at their edges: take them only for a clear win.
    c.block = c.blocked_s < 0.95 * c.channels_last_s ? c.preferred_block : 0;
    return c;
  }();
  return choice;
}

namespace {

// Probe results by (what, shape, block, threads): measured once per process.
std::mutex probe_mu;
std::map<std::vector<int64_t>, double>& probe_cache() {
  static std::map<std::vector<int64_t>, double> cache;
  return cache;
}

// The measurement cache's key of a probe: its name and numbers (the entry adds the threads).
std::string disk_key(const char* what, const std::vector<int64_t>& numbers) {
  std::string key = what;
  for (int64_t v : numbers) {
    key += ' ';
    key += std::to_string(v);
  }
  return key;
}

template <class F>
double cached_probe(const char* what, std::vector<int64_t> key, F&& measure) {
  const std::string on_disk = disk_key(what, key);
  key.push_back(dnnl_prepare_threads());
  {
    std::lock_guard<std::mutex> lock(probe_mu);
    auto it = probe_cache().find(key);
    if (it != probe_cache().end()) return it->second;
  }
  double t;
  if (auto v = MeasureCache::current().load(on_disk); v && v->size() == 1) {
    t = (*v)[0];
  } else {
    ProbeTimer timer;
    t = measure();
    MeasureCache::current().store(on_disk, {t});
  }
  std::lock_guard<std::mutex> lock(probe_mu);
  probe_cache().emplace(std::move(key), t);
  return t;
}

// A probe activation: one storage of numel floats holding a small repeating pattern, viewed with
// each layout's sizes and strides (the values do not change a convolution's speed).
Tensor probe_flat(int64_t numel) {
  Tensor t = empty(to_shape({numel}), DType::f32);
  float* p = static_cast<float*>(t.raw_data());
  for (int64_t i = 0; i < numel; ++i) p[i] = 0.01f * static_cast<float>((i & 15) - 8);
  return t;
}

double best_of(const std::function<void()>& f, int runs) {
  f();  // warm-up: primitive, weight reorder
  double best = 1e30;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

namespace {

// Whether oneDNN can run the convolution on nChw<B>c at all (B 0: channels-last, always).
bool block_divides(const ConvProbeShape& s, int64_t B) {
  const auto& p = s.p;
  const bool depthwise = p.groups == s.c && p.groups == s.o;
  return B == 0 ||
         (s.c % B == 0 && s.o % B == 0 &&
          (p.groups == 1 || depthwise || ((s.c / p.groups) % B == 0 && (s.o / p.groups) % B == 0)));
}

}  // namespace

std::string dnnl_conv_probe_key(const ConvProbeShape& s) {
  const auto& p = s.p;
  std::vector<int64_t> numbers{s.n, s.c, s.h, s.w, s.o, s.kh, s.kw, p.groups};
  for (int i = 0; i < 2; ++i)
    numbers.insert(numbers.end(), {p.stride[i], p.padding[i], p.dilation[i]});
  return disk_key("conv", numbers);
}

void dnnl_forget_probes() {
  std::lock_guard<std::mutex> lock(probe_mu);
  probe_cache().clear();
}

double dnnl_measured_conv_s(const ConvProbeShape& s, int block) {
  const auto& p = s.p;
  const int64_t oh = (s.h + 2 * p.padding[0] - p.dilation[0] * (s.kh - 1) - 1) / p.stride[0] + 1;
  const int64_t ow = (s.w + 2 * p.padding[1] - p.dilation[1] * (s.kw - 1) - 1) / p.stride[1] + 1;
  if (oh <= 0 || ow <= 0 || s.c % p.groups != 0 || s.o % p.groups != 0) return INFINITY;
  if (!block_divides(s, block)) return INFINITY;
  auto key_of = [&](int64_t B) {
    std::vector<int64_t> key{1, s.n, s.c, s.h, s.w, s.o, s.kh, s.kw, p.groups, B};
    for (int i = 0; i < 2; ++i) key.insert(key.end(), {p.stride[i], p.padding[i], p.dilation[i]});
    key.push_back(dnnl_prepare_threads());
    return key;
  };
  {
    std::lock_guard<std::mutex> lock(probe_mu);
    auto it = probe_cache().find(key_of(block));
    if (it != probe_cache().end()) return it->second;
  }
  // The measurement cache holds the three layouts' times of the shape in one entry.
  const std::string on_disk = dnnl_conv_probe_key(s);
  const int64_t all_blocks[3] = {0, 8, 16};
  if (auto v = MeasureCache::current().load(on_disk); v && v->size() == 3) {
    double result = INFINITY;
    std::lock_guard<std::mutex> lock(probe_mu);
    for (int i = 0; i < 3; ++i) {
      probe_cache().emplace(key_of(all_blocks[i]), (*v)[i]);
      if (all_blocks[i] == block) result = (*v)[i];
    }
    return result;
  }
  ProbeTimer timer;
  // Every layout of the shape is timed in the same rounds, one after the other (the machine's
  // speed drifts between probes taken at different times by more than the layouts differ), and
  // all three results are cached.
  Tensor x_flat = probe_flat(s.n * s.c * s.h * s.w);
  Tensor y_all = empty(to_shape({s.n * s.o * oh * ow}), DType::f32);
  const Shape ws = to_shape({s.o, s.c / p.groups, s.kh, s.kw});
  Tensor w = probe_tensor(ws, contiguous_strides(ws), 0.05f);
  Tensor b = probe_tensor(to_shape({s.o}), to_shape({1}), 0.1f);
  std::vector<std::function<void()>> runs;
  std::vector<int64_t> blocks;
  for (int64_t B : {int64_t{0}, int64_t{8}, int64_t{16}}) {
    if (!block_divides(s, B)) continue;
    if (B == 0) {
      const Shape xsz = to_shape({s.n, s.c, s.h, s.w}), ysz = to_shape({s.n, s.o, oh, ow});
      Tensor x = make_view(x_flat, xsz, channels_last_strides(xsz), 0);
      Tensor y = make_view(y_all, ysz, channels_last_strides(ysz), 0);
      runs.push_back([=] { conv2d_forward(x, w, b, p, y); });
    } else {
      const Shape xsz = to_shape({s.n, s.c / B, s.h, s.w, B});
      const Shape ysz = to_shape({s.n, s.o / B, oh, ow, B});
      Tensor x = make_view(x_flat, xsz, contiguous_strides(xsz), 0);
      Tensor y = make_view(y_all, ysz, contiguous_strides(ysz), 0);
      runs.push_back([=] { conv2d_forward_blocked(x, w, b, p, y); });
    }
    blocks.push_back(B);
  }
  std::vector<double> best(runs.size(), INFINITY);
  std::vector<bool> ok(runs.size(), true);
  for (size_t i = 0; i < runs.size(); ++i) {  // warm-up: the primitive made, the weight reordered
    try {
      runs[i]();
    } catch (const std::exception&) {
      ok[i] = false;  // no kernel for this layout
    }
  }
  // Enough rounds for a stable best, few for slow shapes.
  const double flops = 2.0 * s.n * s.o * oh * ow * (s.c / p.groups) * s.kh * s.kw;
  const int rounds = flops > 2e8 ? 2 : flops > 2e7 ? 3 : 5;
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < runs.size(); ++i) {
      if (!ok[i]) continue;
      const auto t0 = std::chrono::steady_clock::now();
      runs[i]();
      best[i] = std::min(
          best[i], std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  double result = INFINITY;
  std::vector<double> stored(3, INFINITY);
  {
    std::lock_guard<std::mutex> lock(probe_mu);
    for (size_t i = 0; i < runs.size(); ++i) {
      probe_cache().emplace(key_of(blocks[i]), best[i]);
      if (blocks[i] == block) result = best[i];
      stored[blocks[i] == 0 ? 0 : blocks[i] == 8 ? 1 : 2] = best[i];
    }
  }
  MeasureCache::current().store(on_disk, stored);
  return result;
}

double dnnl_measured_reorder_s(int64_t n, int64_t c, int64_t h, int64_t w, int block) {
  if (block != 8 && block != 16) return INFINITY;
  if (c % block != 0) return INFINITY;
  return cached_probe("reorder", {2, n, c, h, w, block}, [&] {
    Tensor x_flat = probe_flat(n * c * h * w);
    const Shape xsz = to_shape({n, c, h, w});
    Tensor x = make_view(x_flat, xsz, channels_last_strides(xsz), 0);
    const Shape bsz = to_shape({n, c / block, h, w, block});
    Tensor y = empty(bsz, DType::f32);
    return best_of([&] { lathe::kernels::to_blocked(x, y); }, 3);
  });
}

bool winograd_eligible(int64_t channels, int64_t out_channels, int64_t kh, int64_t kw,
                       const Conv2dParams& p) {
  return kh == 3 && kw == 3 && p.stride[0] == 1 && p.stride[1] == 1 && p.dilation[0] == 1 &&
         p.dilation[1] == 1 && p.groups == 1 && channels % 16 == 0 && out_channels % 16 == 0;
}

const WinogradChoice& dnnl_measured_winograd() {
  static const WinogradChoice choice = [] {
    WinogradChoice c;
    const int64_t B = 16, C = 128, H = 28;
    const memory::desc md({1, C, H, H}, memory::data_type::f32, memory::format_tag::nChw16c);
    const memory::desc wd({C, C, 3, 3}, memory::data_type::f32, memory::format_tag::any);
    try {
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                        dnnl::algorithm::convolution_winograd, md, wd, md, {1, 1},
                                        {1, 1}, {1, 1});
      dnnl::convolution_forward::primitive_desc pd(d, dnnl_engine());
    } catch (const dnnl::error&) {
      return c;  // no Winograd kernel on this machine
    }
    c.available = true;
    const Shape xb = to_shape({1, C / B, H, H, B});
    Tensor x = probe_tensor(xb, contiguous_strides(xb), 1.0f),
           y = probe_tensor(xb, contiguous_strides(xb), 0.0f);
    const Shape ws = to_shape({C, C, 3, 3});
    Tensor w = probe_tensor(ws, contiguous_strides(ws), 0.05f);
    Tensor b = probe_tensor(to_shape({C}), to_shape({1}), 0.1f);
    Conv2dParams direct;
    direct.padding[0] = direct.padding[1] = 1;
    Conv2dParams wino = direct;
    wino.winograd = true;
    ConvPostOps post;
    post.act = ConvPostOps::Act::relu;
    if (auto v = MeasureCache::current().load("winograd"); v && v->size() == 2) {
      c.direct_s = (*v)[0];
      c.winograd_s = (*v)[1];
    } else {
      ProbeTimer timer;
      std::tie(c.direct_s, c.winograd_s) =
          best_alternating([&] { conv2d_forward_blocked(x, w, b, direct, y, post); },
                           [&] { conv2d_forward_blocked(x, w, b, wino, y, post); }, 7);
      MeasureCache::current().store("winograd", {c.direct_s, c.winograd_s});
    }
    c.use = c.winograd_s < 0.9 * c.direct_s;
    return c;
  }();
  return choice;
}

}  // namespace lathe::detail
