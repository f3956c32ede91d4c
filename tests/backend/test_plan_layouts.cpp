// The plan_layouts pass: chains of conv2d_fused run on oneDNN's blocked layout with reorders only
// at the region's edges (graph in, graph out, verified, and run before / after on random data).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <unordered_set>

#include "lathe/backend/backend.h"
#include "lathe/backend/cpu/plan_layouts.h"
#include "lathe/core/random.h"
#include "lathe/ir/graph.h"
#include "lathe/kernels/dnnl_conv.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"
#include "tests/backend/backend_test_util.h"

using namespace lathe;

namespace {

Tensor rnd(const std::vector<int64_t>& shape, uint64_t seed) {
  Generator g(seed);
  return randn(to_shape(shape), DType::f32, &g);
}

// Three chained f32 convolutions over 144-term sums on differently ordered kernels (oneDNN picks
// other kernels for each layout, and on AVX-512 an nChw8c kernel that accumulates in another order)
// differ by a few 1e-5 relative.
constexpr double kTol = 1e-4;

using lathe::testing::max_rel_diff;

struct Built {
  std::unique_ptr<ir::Graph> g = std::make_unique<ir::Graph>();
  std::vector<Tensor> inputs;
  ir::Value* input(const Tensor& t) {
    inputs.push_back(t);
    return g->add_input(
        ir::ValueType::of(t),
        ir::InputSource{ir::InputSource::Kind::argument, static_cast<int>(inputs.size() - 1), ""});
  }
  // conv2d_fused(x, w, b, residual) with `act` after the conv and relu after the residual add.
  ir::Value* conv(ir::Value* x, ir::Value* w, ir::Value* b, ir::Value* residual, int64_t groups,
                  int64_t stride, const char* act) {
    Attrs a{{"stride", Shape{stride, stride}},
            {"padding", Shape{1, 1}},
            {"dilation", Shape{1, 1}},
            {"groups", groups},
            {"eps", 0.0},
            {"act", std::string(act)},
            {"act_min", 0.0},
            {"act_max", 6.0},
            {"act2", std::string(residual ? "relu" : "none")},
            {"act2_min", 0.0},
            {"act2_max", 0.0}};
    std::vector<ir::Value*> in{x, w, b, nullptr, nullptr, nullptr, nullptr, residual};
    const OpDef& def = OpRegistry::global().get("conv2d_fused");
    std::vector<Tensor> fakes;
    for (ir::Value* v : in) fakes.push_back(v ? ir::fake_tensor(v->type()) : Tensor());
    std::vector<TensorMeta> m = def.shape(fakes, a);
    ir::ValueType t;
    t.dtype = m[0].dtype;
    t.sizes = m[0].sizes;
    t.strides = m[0].strides;
    return g->add_node(def, std::move(in), std::move(a), {t})->output();
  }
  ir::Value* max_pool(ir::Value* x, bool ceil_mode) {
    Attrs a{{"kernel", Shape{3, 3}},
            {"stride", Shape{2, 2}},
            {"padding", Shape{1, 1}},
            {"dilation", Shape{1, 1}},
            {"ceil_mode", ceil_mode}};
    const OpDef& def = OpRegistry::global().get("max_pool2d");
    std::vector<TensorMeta> m = def.shape(std::vector<Tensor>{ir::fake_tensor(x->type())}, a);
    ir::ValueType t;
    t.dtype = m[0].dtype;
    t.sizes = m[0].sizes;
    t.strides = m[0].strides;
    return g->add_node(def, {x}, std::move(a), {t})->output();
  }
};

std::vector<std::string> op_names(const ir::Graph& g) {
  std::vector<std::string> names;
  for (const ir::Node* n : g.nodes()) names.push_back(n->op().name);
  return names;
}

std::vector<Tensor> run(const ir::Graph& g, const std::vector<Tensor>& in) {
  return backend::create_backend("interpreter")->compile(g)->run(in, {});
}

// dense conv -> depthwise conv (+ the first conv's output as residual) -> strided dense conv, as
// in an inverted-residual block; `leak` also returns the middle value (read outside the region).
Built block(bool leak) {
  Built b;
  ir::Value* x = b.input(rnd({2, 16, 9, 9}, 1).to_channels_last());
  ir::Value* w1 = b.input(rnd({16, 16, 3, 3}, 2));
  ir::Value* b1 = b.input(rnd({16}, 3));
  ir::Value* w2 = b.input(rnd({16, 1, 3, 3}, 4));
  ir::Value* w3 = b.input(rnd({24, 16, 3, 3}, 5));
  ir::Value* y1 = b.conv(x, w1, b1, nullptr, 1, 1, "clip");
  ir::Value* y2 = b.conv(y1, w2, nullptr, y1, 16, 1, "none");
  ir::Value* y3 = b.conv(y2, w3, nullptr, nullptr, 1, 2, "relu");
  std::vector<ir::Value*> outs{y3};
  if (leak) outs.push_back(y2);
  b.g->set_outputs(outs);
  return b;
}

TEST(PlanLayoutsPass, KeepsAConvChainBlocked) {
  Built b = block(false);
  backend::cpu::PlanLayoutsStats s;
  auto out = backend::cpu::plan_layouts(*b.g, &s, 8, false);
  out->verify();
  EXPECT_EQ(op_names(*out),
            (std::vector<std::string>{"to_blocked", "conv2d_blocked", "conv2d_blocked",
                                      "conv2d_blocked", "from_blocked"}));
  EXPECT_EQ(out->nodes().front()->attrs().get_int("block"), 8);
  EXPECT_EQ(s.blocked_convs, 3);
  EXPECT_EQ(s.to_blocked, 1);
  EXPECT_EQ(s.from_blocked, 1);
  Tensor got = run(*out, b.inputs)[0], want = run(*b.g, b.inputs)[0];
  EXPECT_TRUE(got.is_channels_last());
  EXPECT_LT(max_rel_diff(got, want), kTol);
}

// With 16-channel blocks the last convolution (24 output channels) cannot join the region: the
// first two run on nChw16c, the third stays channels-last.
TEST(PlanLayoutsPass, SixteenChannelBlocksLeaveOtherChannelCountsOut) {
  Built b = block(false);
  backend::cpu::PlanLayoutsStats s;
  auto out = backend::cpu::plan_layouts(*b.g, &s, 16, false);
  out->verify();
  EXPECT_EQ(op_names(*out),
            (std::vector<std::string>{"to_blocked", "conv2d_blocked", "conv2d_blocked",
                                      "from_blocked", "conv2d_fused"}));
  EXPECT_EQ(out->nodes().front()->attrs().get_int("block"), 16);
  EXPECT_EQ(out->nodes()[1]->output()->type().sizes[4].maybe_int(), 16);
  EXPECT_EQ(s.blocked_convs, 2);
  Tensor got = run(*out, b.inputs)[0], want = run(*b.g, b.inputs)[0];
  EXPECT_TRUE(got.is_channels_last());
  EXPECT_LT(max_rel_diff(got, want), kTol);
}

TEST(PlanLayoutsPass, BlockZeroLeavesTheGraphAndABadBlockIsAnError) {
  Built b = block(false);
  backend::cpu::PlanLayoutsStats s;
  auto out = backend::cpu::plan_layouts(*b.g, &s, 0, false);
  EXPECT_EQ(op_names(*out), op_names(*b.g));
  EXPECT_EQ(s.blocked_convs, 0);
  EXPECT_THROW(backend::cpu::plan_layouts(*b.g, &s, 4, false), Error);
  const int preferred = backend::cpu::plan_layouts_block();
  EXPECT_TRUE(preferred == 0 || preferred == 8 || preferred == 16) << preferred;
}

TEST(PlanLayoutsPass, AValueReadOutsideTheRegionIsReorderedBack) {
  Built b = block(true);
  backend::cpu::PlanLayoutsStats s;
  auto out = backend::cpu::plan_layouts(*b.g, &s, 8, false);
  out->verify();
  // The middle value is read outside: it comes back to channels-last, and the last conv, which
  // then touches no blocked value, stays as it was.
  EXPECT_EQ(s.blocked_convs, 2);
  EXPECT_EQ(s.from_blocked, 1);
  EXPECT_EQ(op_names(*out).back(), "conv2d_fused");
  auto got = run(*out, b.inputs), want = run(*b.g, b.inputs);
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_LT(max_rel_diff(got[i], want[i]), kTol) << i;
}

TEST(PlanLayoutsPass, LeavesALoneConvolutionAndOddChannelCountsAlone) {
  Built b;
  ir::Value* x = b.input(rnd({1, 12, 8, 8}, 1).to_channels_last());
  ir::Value* w1 = b.input(rnd({12, 12, 3, 3}, 2));
  ir::Value* w2 = b.input(rnd({16, 12, 3, 3}, 3));
  ir::Value* y1 = b.conv(x, w1, nullptr, nullptr, 1, 1, "relu");   // 12 channels: not a candidate
  ir::Value* y2 = b.conv(y1, w2, nullptr, nullptr, 1, 1, "relu");  // alone: no blocked value
  b.g->set_outputs({y2});
  backend::cpu::PlanLayoutsStats s;
  auto out = backend::cpu::plan_layouts(*b.g, &s, 8, false);
  EXPECT_EQ(op_names(*out), (std::vector<std::string>{"conv2d_fused", "conv2d_fused"}));
  EXPECT_EQ(s.blocked_convs, 0);
}

// Winograd's transforms add rounding: on these unscaled N(0, 1) weights (outputs around 20) its
// results differ from the direct algorithm's by up to about 4e-4 relative (measured); the model
// accuracy runs (lathe-bench --accuracy) hold it to the fp64 reference.
constexpr double kWinogradTol = 2e-3;

// Winograd (oneDNN's, on nChw16c): every 3x3 stride-1 dense convolution with channel counts
// that are multiples of 16 runs with algorithm = "winograd", even alone, and the block becomes 16
// whatever block was asked for (0 here); the strided and depthwise ones stay direct. Where oneDNN
// has no Winograd kernel (AVX2 machines) the kernel falls back to direct, with the same result.
TEST(PlanLayoutsPass, WinogradConvolutionsRunOnSixteenChannelBlocks) {
  Built b;
  ir::Value* x = b.input(rnd({2, 16, 10, 10}, 1).to_channels_last());
  ir::Value* w1 = b.input(rnd({32, 16, 3, 3}, 2));
  ir::Value* b1 = b.input(rnd({32}, 3));
  ir::Value* w2 = b.input(rnd({32, 32, 3, 3}, 4));
  ir::Value* w3 = b.input(rnd({32, 32, 3, 3}, 5));
  ir::Value* y1 = b.conv(x, w1, b1, nullptr, 1, 1, "relu");        // winograd
  ir::Value* y2 = b.conv(y1, w2, nullptr, y1, 1, 1, "none");       // winograd, residual y1
  ir::Value* y3 = b.conv(y2, w3, nullptr, nullptr, 1, 2, "relu");  // stride 2: direct
  b.g->set_outputs({y3});
  backend::cpu::PlanLayoutsStats s;
  auto out = backend::cpu::plan_layouts(*b.g, &s, 0, true);
  out->verify();
  EXPECT_EQ(s.block, 16);
  EXPECT_EQ(s.blocked_convs, 3);
  EXPECT_EQ(s.winograd_convs, 2);
  std::vector<std::string> algorithms;
  for (const ir::Node* n : out->nodes())
    if (n->op().name == "conv2d_blocked")
      algorithms.push_back(n->attrs().has("algorithm") ? n->attrs().get_string("algorithm") : "");
  EXPECT_EQ(algorithms, (std::vector<std::string>{"winograd", "winograd", ""}));
  Tensor got = run(*out, b.inputs)[0], want = run(*b.g, b.inputs)[0];
  EXPECT_TRUE(got.is_channels_last());
  EXPECT_LT(max_rel_diff(got, want), kWinogradTol);
  // A lone Winograd convolution is converted too (two reorders pay for themselves).
  Built lone;
  ir::Value* lx = lone.input(rnd({1, 16, 12, 12}, 6).to_channels_last());
  ir::Value* lw = lone.input(rnd({16, 16, 3, 3}, 7));
  lone.g->set_outputs({lone.conv(lx, lw, nullptr, nullptr, 1, 1, "relu")});
  auto lone_out = backend::cpu::plan_layouts(*lone.g, &s, 0, true);
  EXPECT_EQ(op_names(*lone_out),
            (std::vector<std::string>{"to_blocked", "conv2d_blocked", "from_blocked"}));
  EXPECT_LT(max_rel_diff(run(*lone_out, lone.inputs)[0], run(*lone.g, lone.inputs)[0]),
            kWinogradTol);
  // With Winograd off the same graph is left alone at block 0.
  EXPECT_EQ(op_names(*backend::cpu::plan_layouts(*lone.g, &s, 0, false)),
            (std::vector<std::string>{"conv2d_fused"}));
}

TEST(PlanLayoutsPass, WinogradChoiceIsMeasuredAndOverridable) {
  const auto& c = lathe::detail::dnnl_measured_winograd();
  if (c.available) {
    EXPECT_GT(c.direct_s, 0);
    EXPECT_GT(c.winograd_s, 0);
    EXPECT_EQ(c.use, c.winograd_s < 0.9 * c.direct_s);
  } else {
    EXPECT_FALSE(c.use);
  }
  setenv("LATHE_CPU_WINOGRAD", "0", 1);
  EXPECT_FALSE(backend::cpu::plan_layouts_winograd());
  setenv("LATHE_CPU_WINOGRAD", "1", 1);
  EXPECT_EQ(backend::cpu::plan_layouts_winograd(), c.available);
  setenv("LATHE_CPU_WINOGRAD", "yes", 1);
  EXPECT_THROW(backend::cpu::plan_layouts_winograd(), Error);
  unsetenv("LATHE_CPU_WINOGRAD");
  EXPECT_EQ(backend::cpu::plan_layouts_winograd(), c.use);
}

// The reorders themselves: element (n, c, h, w) lands at [n, c / B, h, w, c % B] and back, for
// channels-last inputs (the kernels' fast path), contiguous NCHW and a strided view (the
// general path), at both blocks.
TEST(BlockedLayoutOps, ToAndFromBlockedMoveEveryElement) {
  for (int64_t B : {8, 16}) {
    Tensor base = rnd({2, 2 * B, 5, 7}, 9);
    for (const Tensor& x : {base.to_channels_last(), base.contiguous(),
                            rnd({2, 2 * B, 5, 14}, 10).slice(3, 0, 14, 2)}) {
      SCOPED_TRACE(std::to_string(B) + " " + x.shape_string() + " strides " +
                   std::to_string(x.int_strides()[1]));
      Tensor b = dispatch1(LATHE_OP("to_blocked"), std::vector<Tensor>{x}, Attrs{}.set("block", B));
      ASSERT_EQ(b.shape(), (std::vector<int64_t>{2, 2, 5, x.sizes()[3].expect_int(), B}));
      auto xv = x.contiguous().to_vector<float>(), bv = b.to_vector<float>();
      const int64_t C = 2 * B, H = 5, W = x.sizes()[3].expect_int();
      for (int64_t n = 0; n < 2; ++n)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t h = 0; h < H; ++h)
            for (int64_t w = 0; w < W; ++w)
              ASSERT_EQ(bv[(((n * 2 + c / B) * H + h) * W + w) * B + c % B],
                        xv[((n * C + c) * H + h) * W + w]);
      Tensor back = dispatch1(LATHE_OP("from_blocked"), std::vector<Tensor>{b}, Attrs{});
      EXPECT_TRUE(back.is_channels_last());
      EXPECT_EQ(back.contiguous().to_vector<float>(), xv);
    }
  }
}

// A max pooling between two blocked convolutions runs on the blocked layout too (oneDNN pools
// nChw16c / nChw8c), with ceil_mode as squeezenet uses it; one after a non-candidate stays.
TEST(PlanLayoutsPass, MaxPoolingBetweenBlockedConvolutionsStaysBlocked) {
  for (int64_t B : {8, 16}) {
    Built b;
    ir::Value* x = b.input(rnd({2, 16, 11, 11}, 1).to_channels_last());
    // Weights scaled as initialization does (outputs of order 1, not 10).
    ir::Value* w1 = b.input(mul(rnd({16, 16, 3, 3}, 2), 0.1));
    ir::Value* w2 = b.input(mul(rnd({32, 16, 3, 3}, 3), 0.1));
    ir::Value* y1 = b.conv(x, w1, nullptr, nullptr, 1, 1, "relu");
    ir::Value* p = b.max_pool(y1, true);
    ir::Value* y2 = b.conv(p, w2, nullptr, nullptr, 1, 1, "relu");
    b.g->set_outputs({y2});
    backend::cpu::PlanLayoutsStats s;
    auto out = backend::cpu::plan_layouts(*b.g, &s, static_cast<int>(B), false);
    out->verify();
    EXPECT_EQ(op_names(*out),
              (std::vector<std::string>{"to_blocked", "conv2d_blocked", "max_pool2d_blocked",
                                        "conv2d_blocked", "from_blocked"}))
        << "block " << B;
    EXPECT_EQ(s.blocked_pools, 1);
    for (int call = 0; call < 2; ++call)
      EXPECT_LT(max_rel_diff(run(*out, b.inputs)[0], run(*b.g, b.inputs)[0]), kTol) << B;
  }
  // The input's pooling comes before any blocked value: left as it is.
  Built b;
  ir::Value* x = b.input(rnd({1, 16, 9, 9}, 4).to_channels_last());
  ir::Value* w = b.input(rnd({16, 16, 3, 3}, 5));
  ir::Value* w2 = b.input(rnd({16, 16, 3, 3}, 6));
  ir::Value* y = b.conv(b.conv(b.max_pool(x, false), w, nullptr, nullptr, 1, 1, "relu"), w2,
                        nullptr, nullptr, 1, 1, "relu");
  b.g->set_outputs({y});
  backend::cpu::PlanLayoutsStats s;
  auto out = backend::cpu::plan_layouts(*b.g, &s, 16, false);
  EXPECT_EQ(op_names(*out).front(), "max_pool2d");
  EXPECT_EQ(s.blocked_pools, 0);
}

// NaN and inf through the blocked kernels as through the plain ones: oneDNN's max pooling and its
// fused relu drop NaN (lathe/kernels/non_finite.h), the blocked convolution and pooling take
// their NaN-safe paths, and the NaN positions and values come out as the plain graph's.
TEST(PlanLayoutsPass, BlockedConvolutionsAndPoolingPropagateNaN) {
  for (int64_t B : {8, 16}) {
    Built b;
    Tensor x = rnd({2, 16, 11, 11}, 7);
    float* px = static_cast<float*>(x.raw_data());
    px[5] = std::nanf("");
    px[300] = INFINITY;
    px[2000] = -INFINITY;
    px[16 * 121 + 50] = std::nanf("");  // the second sample
    ir::Value* xv = b.input(x.to_channels_last());
    ir::Value* w1 = b.input(mul(rnd({16, 16, 3, 3}, 8), 0.1));
    ir::Value* w2 = b.input(mul(rnd({32, 16, 3, 3}, 9), 0.1));
    ir::Value* y1 = b.conv(xv, w1, nullptr, nullptr, 1, 1, "relu");
    ir::Value* p = b.max_pool(y1, true);
    ir::Value* y2 = b.conv(p, w2, nullptr, nullptr, 1, 1, "relu");
    b.g->set_outputs({y2});
    backend::cpu::PlanLayoutsStats s;
    auto out = backend::cpu::plan_layouts(*b.g, &s, static_cast<int>(B), false);
    EXPECT_EQ(s.blocked_pools, 1);
    const std::vector<double> got = run(*out, b.inputs)[0].contiguous().to_vector<double>();
    const std::vector<double> want = run(*b.g, b.inputs)[0].contiguous().to_vector<double>();
    ASSERT_EQ(got.size(), want.size());
    int64_t nans = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(std::isnan(got[i]), std::isnan(want[i])) << "block " << B << " element " << i;
      nans += std::isnan(want[i]);
      if (std::isfinite(want[i])) {
        EXPECT_NEAR(got[i], want[i], kTol * (1 + std::abs(want[i]))) << B << " " << i;
      }
    }
    EXPECT_GT(nans, 0) << "relu and max pooling keep NaN";
  }
}

}  // namespace

// The per-shape layout probe: finite where the layout applies, +inf where the block does not
// divide the channels, and measured once (the cached value comes back exactly).
TEST(PlanLayoutsChoice, ConvProbeTimesEachLayoutOncePerShape) {
  lathe::detail::ConvProbeShape s;
  s.n = 1, s.c = 32, s.h = 20, s.w = 20, s.o = 32, s.kh = 3, s.kw = 3;
  s.p.padding[0] = s.p.padding[1] = 1;
  s.p.groups = 32;  // depthwise
  for (int block : {0, 8, 16}) {
    const double t = lathe::detail::dnnl_measured_conv_s(s, block);
    EXPECT_GT(t, 0) << block;
    EXPECT_TRUE(std::isfinite(t)) << block;
    EXPECT_EQ(lathe::detail::dnnl_measured_conv_s(s, block), t) << "cached, block " << block;
  }
  s.c = s.o = s.p.groups = 24;  // 24 channels: nChw16c does not apply
  EXPECT_TRUE(std::isfinite(lathe::detail::dnnl_measured_conv_s(s, 8)));
  EXPECT_TRUE(std::isinf(lathe::detail::dnnl_measured_conv_s(s, 16)));
  EXPECT_TRUE(std::isfinite(lathe::detail::dnnl_measured_reorder_s(1, 24, 20, 20, 8)));
  EXPECT_TRUE(std::isinf(lathe::detail::dnnl_measured_reorder_s(1, 24, 20, 20, 16)));
}

// choose_block on an inverted-residual block (all memory-bound convolutions): the three plans'
// costs are measured and the block taken is the cheapest by the 5% rule; the plan with it runs
// the same numbers as the graph. A graph with a Winograd convolution takes 16 unmeasured; one
// that no block would change takes the machine's block.
TEST(PlanLayoutsChoice, ChoosesTheMeasuredCheapestBlock) {
  Built b = block(false);
  const backend::cpu::BlockChoice c = backend::cpu::choose_block(*b.g, false);
  EXPECT_FALSE(c.winograd);
  EXPECT_GT(c.probed_convs, 0);
  EXPECT_GT(c.cost_s[0], 0);
  EXPECT_TRUE(std::isfinite(c.cost_s[1]));  // 16 and 24 channels: nChw8c plans all three
  double best = c.cost_s[0];
  int want = 0;
  for (int k : {1, 2})
    if (c.cost_s[k] < 0.95 * c.cost_s[0] && c.cost_s[k] < best) best = c.cost_s[k], want = 8 * k;
  EXPECT_EQ(c.block, want);
  // The per-region labelling can keep everything channels-last: never dearer than that.
  EXPECT_LE(c.cost_s[1], c.cost_s[0] * (1 + 1e-9));
  EXPECT_LE(c.cost_s[2], c.cost_s[0] * (1 + 1e-9));
  EXPECT_EQ(c.per_region, c.block != 0);
  EXPECT_EQ(c.convert.empty(), c.block == 0);
  backend::cpu::PlanLayoutsStats s;
  auto out = backend::cpu::plan_layouts(*b.g, &s, c.block, false, nullptr,
                                        c.per_region ? &c.convert : nullptr);
  EXPECT_EQ(s.blocked_convs, static_cast<int>(c.convert.size()));
  EXPECT_LT(max_rel_diff(run(*out, b.inputs)[0], run(*b.g, b.inputs)[0]), kTol);

  Built w;
  ir::Value* x = w.input(rnd({1, 16, 12, 12}, 6).to_channels_last());
  ir::Value* wt = w.input(rnd({16, 16, 3, 3}, 7));
  w.g->set_outputs({w.conv(x, wt, nullptr, nullptr, 1, 1, "relu")});
  const auto& wino = lathe::detail::dnnl_measured_winograd();
  const backend::cpu::BlockChoice cw = backend::cpu::choose_block(*w.g, true);
  if (wino.available) {
    EXPECT_TRUE(cw.winograd);
    EXPECT_EQ(cw.block, 16);
  }
  // Without Winograd a lone memory-bound convolution is measured: it goes blocked only when that
  // pays for its two reorders as well.
  const backend::cpu::BlockChoice cd = backend::cpu::choose_block(*w.g, false);
  EXPECT_FALSE(cd.winograd);
  EXPECT_EQ(cd.probed_convs, 1);
  EXPECT_EQ(cd.convert.size(), cd.block != 0 ? 1u : 0u);
  // Weights that are no constants: measured as before (an inference graph on the lazy device) ...
  std::unordered_set<const ir::Value*> none;
  const backend::cpu::BlockChoice cn = backend::cpu::choose_block(*b.g, false, &none);
  EXPECT_FALSE(cn.training);
  EXPECT_GT(cn.probed_convs, 0);
  // ... but a graph that also writes (a training step): channels-last, unmeasured.
  {
    Built t = block(false);
    ir::Value* out = t.g->outputs()[0];
    ir::Value* acc = t.input(zeros(to_shape({2, 24, 5, 5})).to_channels_last());
    const OpDef& add_ = OpRegistry::global().get("add_");
    ir::ValueType at = acc->type();
    t.g->add_node(add_, {acc, out}, Attrs{{"alpha", 1.0}}, {at});
    const backend::cpu::BlockChoice ct = backend::cpu::choose_block(*t.g, false, &none);
    EXPECT_TRUE(ct.training);
    EXPECT_EQ(ct.block, 0);
    EXPECT_EQ(ct.probed_convs, 0);
  }
  // A graph without memory-bound convolutions takes the machine's block, unmeasured.
  Built d;
  ir::Value* dx = d.input(rnd({1, 64, 8, 8}, 6).to_channels_last());
  ir::Value* dw = d.input(rnd({64, 64, 3, 3}, 7));
  d.g->set_outputs({d.conv(dx, dw, nullptr, nullptr, 1, 1, "relu")});
  const backend::cpu::BlockChoice cc = backend::cpu::choose_block(*d.g, false);
  EXPECT_EQ(cc.probed_convs, 0);
  EXPECT_FALSE(cc.per_region);
  EXPECT_EQ(cc.block, backend::cpu::plan_layouts_block());
}

// Per-region plans: plan_layouts converts exactly the convolutions it is given, with reorders
// where a value crosses between the layouts, and computes the same numbers.
TEST(PlanLayoutsPass, ConvertsExactlyTheGivenConvolutions) {
  Built b = block(false);
  std::vector<const ir::Node*> convs;
  for (const ir::Node* n : b.g->nodes()) convs.push_back(n);
  ASSERT_EQ(convs.size(), 3u);
  const Tensor want = run(*b.g, b.inputs)[0];
  struct Case {
    std::vector<int> chosen;
    std::vector<std::string> ops;
    int to, from;
  };
  const std::vector<Case> cases{
      // The middle one: its input is its residual too, reordered once.
      {{1}, {"conv2d_fused", "to_blocked", "conv2d_blocked", "from_blocked", "conv2d_fused"}, 1, 1},
      {{0, 1},
       {"to_blocked", "conv2d_blocked", "conv2d_blocked", "from_blocked", "conv2d_fused"},
       1,
       1},
      {{2}, {"conv2d_fused", "conv2d_fused", "to_blocked", "conv2d_blocked", "from_blocked"}, 1, 1},
      {{}, {"conv2d_fused", "conv2d_fused", "conv2d_fused"}, 0, 0},
  };
  for (const Case& c : cases) {
    std::unordered_set<const ir::Node*> convert;
    for (int i : c.chosen) convert.insert(convs[i]);
    backend::cpu::PlanLayoutsStats s;
    auto out = backend::cpu::plan_layouts(*b.g, &s, 8, false, nullptr, &convert);
    out->verify();
    EXPECT_EQ(op_names(*out), c.ops) << c.chosen.size();
    EXPECT_EQ(s.blocked_convs, static_cast<int>(c.chosen.size()));
    EXPECT_EQ(s.to_blocked, c.to);
    EXPECT_EQ(s.from_blocked, c.from);
    EXPECT_LT(max_rel_diff(run(*out, b.inputs)[0], want), kTol);
  }
}

// A first convolution (3 input channels, no block) reads its nchw input as it is and writes the
// blocked layout itself when its reader is converted: no reorder of its output.
TEST(PlanLayoutsPass, AFirstConvolutionWritesTheBlockedLayoutItself) {
  for (int64_t B : {8, 16}) {
    Built b;
    ir::Value* x = b.input(rnd({2, 3, 17, 17}, 1));  // nchw, as a network's input comes
    ir::Value* w1 = b.input(rnd({16, 3, 3, 3}, 2));
    ir::Value* b1 = b.input(rnd({16}, 3));
    ir::Value* w2 = b.input(rnd({16, 1, 3, 3}, 4));
    ir::Value* w3 = b.input(rnd({16, 16, 3, 3}, 5));
    ir::Value* y1 = b.conv(x, w1, b1, nullptr, 1, 2, "clip");
    ir::Value* y2 = b.conv(y1, w2, nullptr, nullptr, 16, 1, "relu");
    ir::Value* y3 = b.conv(y2, w3, nullptr, y2, 1, 1, "none");
    b.g->set_outputs({y3});
    const Tensor want = run(*b.g, b.inputs)[0];
    std::vector<const ir::Node*> convs;
    for (const ir::Node* n : b.g->nodes()) convs.push_back(n);
    // The whole-graph rule, and per region with all three chosen.
    std::unordered_set<const ir::Node*> all(convs.begin(), convs.end());
    for (const auto* convert : {static_cast<decltype(&all)>(nullptr), &all}) {
      backend::cpu::PlanLayoutsStats s;
      auto out = backend::cpu::plan_layouts(*b.g, &s, B, false, nullptr, convert);
      out->verify();
      EXPECT_EQ(op_names(*out), (std::vector<std::string>{"conv2d_blocked", "conv2d_blocked",
                                                          "conv2d_blocked", "from_blocked"}))
          << B;
      EXPECT_EQ(s.blocked_stems, 1);
      EXPECT_EQ(s.to_blocked, 0);
      const ir::Node* stem = out->nodes().front();
      EXPECT_EQ(stem->inputs()[0]->type().sizes.size(), 4u);
      EXPECT_EQ(stem->attrs().get_int("block"), B);
      EXPECT_LT(max_rel_diff(run(*out, b.inputs)[0], want), kTol) << B;
    }
    // Per region without the first convolution: it stays channels-last and its output is
    // reordered in.
    std::unordered_set<const ir::Node*> rest{convs[1], convs[2]};
    backend::cpu::PlanLayoutsStats s;
    auto out = backend::cpu::plan_layouts(*b.g, &s, B, false, nullptr, &rest);
    EXPECT_EQ(op_names(*out),
              (std::vector<std::string>{"conv2d_fused", "to_blocked", "conv2d_blocked",
                                        "conv2d_blocked", "from_blocked"}));
    EXPECT_EQ(s.blocked_stems, 0);
    EXPECT_LT(max_rel_diff(run(*out, b.inputs)[0], want), kTol) << B;
  }
}

// conv2d_blocked's plain-input form needs its output block, one group and no residual.
TEST(BlockedLayoutOps, APlainInputNeedsTheBlockAttribute) {
  const OpDef& def = OpRegistry::global().get("conv2d_blocked");
  Tensor x = rnd({1, 3, 8, 8}, 1), w = rnd({16, 3, 3, 3}, 2);
  Attrs a{{"stride", Shape{1, 1}}, {"padding", Shape{1, 1}},      {"dilation", Shape{1, 1}},
          {"groups", int64_t{1}},  {"act", std::string("none")},  {"act_min", 0.0},
          {"act_max", 0.0},        {"act2", std::string("none")}, {"act2_min", 0.0},
          {"act2_max", 0.0}};
  std::vector<Tensor> in{x, w, Tensor(), Tensor()};
  EXPECT_THROW(def.shape(in, a), std::exception);
  a.set("block", int64_t{8});
  std::vector<TensorMeta> m = def.shape(in, a);
  EXPECT_EQ(to_ints(m[0].sizes), (std::vector<int64_t>{1, 2, 8, 8, 8}));
  a.set("block", int64_t{5});
  EXPECT_THROW(def.shape(in, a), std::exception);
}

// Training-mode graphs: convolutions between batch norms with batch statistics, each converted
// alone (to_blocked, conv2d_blocked, from_blocked), compute what the graph computes.
TEST(PlanLayoutsPass, LoneConvolutionsBetweenTrainingBatchNormsKeepTheirResults) {
  Built b;
  ir::Value* x = b.input(rnd({2, 16, 8, 8}, 1).to_channels_last());
  ir::Value* w1 = b.input(rnd({16, 1, 3, 3}, 2));
  ir::Value* w2 = b.input(rnd({24, 16, 1, 1}, 3));
  ir::Value* mean = b.input(zeros(to_shape({16})));
  ir::Value* var = b.input(ones(to_shape({16})));
  auto conv = [&](ir::Value* in, ir::Value* w, int64_t groups, int64_t pad) {
    Attrs a{{"stride", Shape{1, 1}},
            {"padding", Shape{pad, pad}},
            {"dilation", Shape{1, 1}},
            {"groups", groups}};
    const OpDef& def = OpRegistry::global().get("conv2d");
    std::vector<ir::Value*> ins{in, w, nullptr};
    std::vector<Tensor> fakes{ir::fake_tensor(in->type()), ir::fake_tensor(w->type()), Tensor()};
    std::vector<TensorMeta> m = def.shape(fakes, a);
    ir::ValueType t;
    t.dtype = m[0].dtype, t.sizes = m[0].sizes, t.strides = m[0].strides;
    return b.g->add_node(def, std::move(ins), std::move(a), {t})->output();
  };
  ir::Value* y1 = conv(x, w1, 16, 1);
  const OpDef& bn = OpRegistry::global().get("batch_norm_functional");
  Attrs bna{{"training", true}, {"momentum", 0.1}, {"eps", 1e-5}};
  std::vector<Tensor> fakes{ir::fake_tensor(y1->type()), ir::fake_tensor(mean->type()),
                            ir::fake_tensor(var->type()), Tensor(), Tensor()};
  std::vector<TensorMeta> m = bn.shape(fakes, bna);
  std::vector<ir::ValueType> types;
  for (const TensorMeta& t : m) {
    ir::ValueType v;
    v.dtype = t.dtype, v.sizes = t.sizes, v.strides = t.strides;
    types.push_back(v);
  }
  ir::Node* bnn = b.g->add_node(bn, {y1, mean, var, nullptr, nullptr}, bna, types);
  ir::Value* y2 = conv(bnn->outputs()[0], w2, 1, 0);
  b.g->set_outputs({y2, bnn->outputs()[1]});
  const auto want = run(*b.g, b.inputs);
  std::vector<const ir::Node*> convs;
  for (const ir::Node* n : b.g->nodes())
    if (n->op().name == "conv2d") convs.push_back(n);
  ASSERT_EQ(convs.size(), 2u);
  for (int mask = 1; mask < 4; ++mask) {
    std::unordered_set<const ir::Node*> convert;
    for (int i = 0; i < 2; ++i)
      if (mask >> i & 1) convert.insert(convs[i]);
    auto out = backend::cpu::plan_layouts(*b.g, nullptr, 8, false, nullptr, &convert);
    out->verify();
    const auto got = run(*out, b.inputs);
    EXPECT_LT(max_rel_diff(got[0], want[0]), kTol) << mask;
    EXPECT_LT(max_rel_diff(got[1], want[1]), kTol) << mask;
  }
}
