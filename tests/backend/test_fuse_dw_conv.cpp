// The fuse_dw_conv pass (a 1x1 conv2d_blocked and the 3x3 depthwise conv2d_blocked reading it
// become one conv2d_1x1_dw_blocked, oneDNN's depthwise post-op): which pairs it takes, graph in
// and graph out, and the fused graph's result against the interpreter on the original graph.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "lathe/backend/backend.h"
#include "lathe/backend/cpu/cpu_backend.h"
#include "lathe/backend/cpu/executor.h"
#include "lathe/backend/cpu/fuse_dw_conv.h"
#include "lathe/core/random.h"
#include "lathe/ir/graph.h"
#include "lathe/kernels/blocked_layout.h"
#include "lathe/kernels/dnnl_conv.h"
#include "lathe/kernels/dnnl_conv_dw.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"
#include "tests/backend/backend_test_util.h"
#include "tests/test_env.h"

using namespace lathe;

namespace {

Tensor rnd(const std::vector<int64_t>& shape, uint64_t seed) {
  Generator g(seed);
  return randn(to_shape(shape), DType::f32, &g);
}

using lathe::testing::max_rel_diff;

using lathe::testing::ScopedEnv;

struct Built {
  std::unique_ptr<ir::Graph> g = std::make_unique<ir::Graph>();
  std::vector<Tensor> inputs;
  backend::cpu::GraphConstants constants;
  ir::Value* input(const Tensor& t, bool constant) {
    inputs.push_back(t);
    constants.push_back(constant ? t : Tensor());
    return g->add_input(ir::ValueType::of(t),
                        ir::InputSource{constant ? ir::InputSource::Kind::captured
                                                 : ir::InputSource::Kind::argument,
                                        static_cast<int>(inputs.size() - 1), ""});
  }
  ir::Value* node(const char* op, std::vector<ir::Value*> in, Attrs a) {
    const OpDef& def = OpRegistry::global().get(op);
    std::vector<Tensor> fakes;
    for (ir::Value* v : in) fakes.push_back(v ? ir::fake_tensor(v->type()) : Tensor());
    std::vector<TensorMeta> m = def.shape(fakes, a);
    ir::ValueType t;
    t.dtype = m[0].dtype;
    t.sizes = m[0].sizes;
    t.strides = m[0].strides;
    if (t.strides.empty() && !in.empty() && in[0]->type().sizes == t.sizes)
      t.strides = in[0]->type().strides;
    return g->add_node(def, std::move(in), std::move(a), {t})->output();
  }
  // conv2d (+ bias) then relu6 (hardtanh 0..6) or relu.
  ir::Value* conv_act(ir::Value* x, int64_t cin, int64_t cout, int64_t k, int64_t stride,
                      int64_t groups, bool relu6, uint64_t seed) {
    ir::Value* w = input(mul(rnd({cout, cin / groups, k, k}, seed), 0.3), true);
    ir::Value* b = input(rnd({cout}, seed + 100), true);
    Attrs a{{"stride", Shape{stride, stride}},
            {"padding", Shape{k / 2, k / 2}},
            {"dilation", Shape{1, 1}},
            {"groups", groups}};
    ir::Value* y = node("conv2d", {x, w, b}, a);
    if (relu6) return node("hardtanh", {y}, Attrs{{"min_val", 0.0}, {"max_val", 6.0}});
    return node("relu", {y}, Attrs{});
  }
};

// An inverted-residual block: 1x1 expand c -> m, kxk depthwise (stride s), 1x1 project m -> c.
// With `expand_is_output` the expanded tensor is also a graph output (two readers).
Built inverted_residual(int64_t batch, int64_t c, int64_t m, int64_t hw, int64_t k, int64_t stride,
                        bool relu6, bool expand_is_output = false) {
  Built b;
  ir::Value* x = b.input(rnd({batch, c, hw, hw}, 1).to_channels_last(), false);
  ir::Value* e = b.conv_act(x, c, m, 1, 1, 1, relu6, 2);
  ir::Value* d = b.conv_act(e, m, m, k, stride, m, relu6, 3);
  ir::Value* w = b.input(mul(rnd({c, m, 1, 1}, 4), 0.1), true);
  ir::Value* p = b.node("conv2d", {d, w, nullptr},
                        Attrs{{"stride", Shape{1, 1}},
                              {"padding", Shape{0, 0}},
                              {"dilation", Shape{1, 1}},
                              {"groups", int64_t{1}}});
  if (expand_is_output)
    b.g->set_outputs({p, e});
  else
    b.g->set_outputs({p});
  b.g->verify();
  return b;
}

int count(const ir::Graph& g, const std::string& op) {
  int n = 0;
  for (const ir::Node* node : g.nodes()) n += node->op().name == op;
  return n;
}

// Runs the pass pipeline on b and checks the optimized graph against the interpreter on the
// original one; returns the optimized graph.
std::unique_ptr<ir::Graph> optimize_and_check(const Built& b) {
  backend::cpu::GraphConstants constants = b.constants;
  auto g = backend::cpu::run_passes(*b.g, constants);
  auto want = backend::create_backend("interpreter")->compile(*b.g)->run(b.inputs, {});
  std::vector<Tensor> in = b.inputs;
  for (size_t i = in.size(); i < g->inputs().size(); ++i) in.push_back(constants.at(i));
  auto exe = backend::cpu::make_planned_executable(*g);
  for (int call = 0; call < 2; ++call) {
    auto got = exe->run(in, {});
    EXPECT_EQ(got.size(), want.size());
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
      EXPECT_LT(max_rel_diff(got[i], want[i]), 1e-4) << "output " << i << " call " << call;
  }
  return g;
}

TEST(FuseDwConv, FusesEachPairOneDnnHasAFusedKernelForAndKeepsTheResult) {
  ScopedEnv block("LATHE_CPU_BLOCK", "16");
  int fused = 0;
  for (auto [batch, c, m, hw, stride, relu6] : {std::tuple{1, 16, 96, 112, 2, true},
                                                {8, 32, 192, 28, 1, true},
                                                {8, 16, 48, 56, 2, false},
                                                {2, 32, 64, 14, 1, false}}) {
    SCOPED_TRACE("batch " + std::to_string(batch) + " " + std::to_string(c) + "->" +
                 std::to_string(m) + " @" + std::to_string(hw) + " stride " +
                 std::to_string(stride));
    Built b = inverted_residual(batch, c, m, hw, 3, stride, relu6);
    detail::PostOps post;
    post.act = post.act2 = relu6 ? detail::PostOps::Act::clip : detail::PostOps::Act::relu;
    post.act_lo = post.act2_lo = 0;
    post.act_hi = post.act2_hi = relu6 ? 6 : 0;
    const std::string impl =
        detail::dnnl_dw_fusion_impl(batch, c, m, hw, hw, 16, stride, true, true, post);
    const bool jit = !impl.empty() && impl.rfind("ref", 0) != 0;
    auto g = optimize_and_check(b);
    std::printf("oneDNN's fused kernel: %s\n", impl.empty() ? "(none)" : impl.c_str());
    EXPECT_EQ(count(*g, "conv2d_1x1_dw_blocked"), jit ? 1 : 0) << "oneDNN: " << impl;
    EXPECT_EQ(count(*g, "conv2d_blocked"), jit ? 1 : 3);  // the projection stays
    if (jit) {
      for (const ir::Node* n : g->nodes()) {
        if (n->op().name != "conv2d_1x1_dw_blocked") continue;
        EXPECT_EQ(n->attrs().get_int("dw_stride"), stride);
        EXPECT_EQ(n->attrs().get_string("act"), relu6 ? "clip" : "relu");
        EXPECT_EQ(n->attrs().get_string("dw_act"), relu6 ? "clip" : "relu");
        EXPECT_EQ(n->inputs()[0]->producer()->op().name, "to_blocked");
        ASSERT_EQ(n->output()->users().size(), 1u);
        EXPECT_EQ(n->output()->users()[0]->op().name, "conv2d_blocked");
      }
    }
    fused += jit;
  }
  // AVX-512 machines (oneDNN's nChw16c kernels) have the fused kernel for mobilenet's 112x112
  // stride-2 block at least.
  if (detail::dnnl_preferred_conv_block() == 16) {
    EXPECT_GT(fused, 0);
  }
}

// NaN and inf reaching the fused activations (oneDNN's relu / clip drop NaN): the fused kernel
// runs the two convolutions on their NaN-safe paths, so its result has NaN exactly where the
// f64 reference (direct loops, 1x1 conv + relu, then the depthwise conv + relu6) has.
TEST(FuseDwConv, FusedKernelPropagatesNaNAsTheTwoConvolutions) {
  const int64_t B = 8, N = 2, C = 16, M = 32, H = 10;
  Tensor x = rnd({N, C, H, H}, 21);
  float* px = static_cast<float*>(x.raw_data());
  px[7] = std::nanf("");
  px[C * H * H + 33] = INFINITY;
  Tensor w = mul(rnd({M, C, 1, 1}, 22), 0.2), bias = rnd({M}, 23);
  Tensor dw = mul(rnd({M, 1, 3, 3}, 24), 0.3), dw_bias = rnd({M}, 25);
  detail::PostOps post;
  post.act = detail::PostOps::Act::relu;
  post.act2 = detail::PostOps::Act::clip;
  post.act2_lo = 0;
  post.act2_hi = 6;
  Tensor xb = empty(to_shape({N, C / B, H, H, B}));
  kernels::to_blocked(x, xb);
  Tensor outb = empty(to_shape({N, M / B, H, H, B}));
  detail::conv2d_1x1_dw_forward_blocked(xb, w, bias, dw, dw_bias, 1, post, outb);
  Tensor got = empty(to_shape({N, M, H, H}));
  kernels::from_blocked(outb, got);
  // The reference in f64 (direct loops).
  auto f64 = [](const Tensor& t) { return t.to(DType::f64); };
  Tensor mid = empty(to_shape({N, M, H, H}), DType::f64);
  detail::PostOps first;
  first.act = post.act;
  detail::conv2d_forward(f64(x), f64(w), f64(bias), detail::Conv2dParams{}, mid, first);
  detail::Conv2dParams dwp;
  dwp.padding[0] = dwp.padding[1] = 1;
  dwp.groups = M;
  detail::PostOps second;
  second.act = post.act2, second.act_lo = post.act2_lo, second.act_hi = post.act2_hi;
  Tensor want = empty(to_shape({N, M, H, H}), DType::f64);
  detail::conv2d_forward(mid, f64(dw), f64(dw_bias), dwp, want, second);
  const std::vector<double> g = got.to_vector<double>(), r = want.to_vector<double>();
  int64_t nans = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_EQ(std::isnan(g[i]), std::isnan(r[i])) << "element " << i;
    nans += std::isnan(r[i]);
    if (std::isfinite(r[i])) {
      EXPECT_NEAR(g[i], r[i], 1e-4 * (1 + std::abs(r[i]))) << "element " << i;
    }
  }
  EXPECT_GT(nans, 0);
}

TEST(FuseDwConv, OffByEnvironment) {
  ScopedEnv block("LATHE_CPU_BLOCK", "16");
  ScopedEnv off("LATHE_DW_FUSION", "0");
  EXPECT_FALSE(backend::cpu::fuse_dw_conv_enabled());
  auto g = optimize_and_check(inverted_residual(1, 16, 96, 112, 3, 2, true));
  EXPECT_EQ(count(*g, "conv2d_1x1_dw_blocked"), 0);
  EXPECT_EQ(count(*g, "conv2d_blocked"), 3);
}

TEST(FuseDwConv, LeavesPairsItCannotFuse) {
  ScopedEnv block("LATHE_CPU_BLOCK", "16");
  // The expanded tensor has a second reader (a graph output): it must be written anyway.
  auto g = optimize_and_check(inverted_residual(1, 16, 96, 112, 3, 2, true, true));
  EXPECT_EQ(count(*g, "conv2d_1x1_dw_blocked"), 0);
  // A 5x5 depthwise convolution (mnasnet): the depthwise post-op is 3x3 only.
  g = optimize_and_check(inverted_residual(1, 16, 96, 112, 5, 2, true));
  EXPECT_EQ(count(*g, "conv2d_1x1_dw_blocked"), 0);
  // Channels-last (no blocked layout): oneDNN's fused nhwc kernel is wrong, never used.
  ScopedEnv channels_last("LATHE_CPU_BLOCK", "0");
  g = optimize_and_check(inverted_residual(1, 16, 96, 112, 3, 2, true));
  EXPECT_EQ(count(*g, "conv2d_1x1_dw_blocked"), 0);
}

TEST(FuseDwConv, ShapeRuleNamesTheOpAndTheProblem) {
  const OpDef& def = OpRegistry::global().get("conv2d_1x1_dw_blocked");
  Attrs a{{"act", std::string("relu")},
          {"act_min", 0.0},
          {"act_max", 0.0},
          {"dw_stride", int64_t{2}},
          {"dw_act", std::string("relu")},
          {"dw_act_min", 0.0},
          {"dw_act_max", 0.0}};
  Tensor x = empty(to_shape({1, 1, 8, 8, 16}), DType::f32);
  Tensor w = empty(to_shape({32, 16, 1, 1}), DType::f32);
  Tensor dw = empty(to_shape({32, 1, 3, 3}), DType::f32);
  Tensor bias = empty(to_shape({32}), DType::f32);
  std::vector<TensorMeta> m = def.shape(std::vector<Tensor>{x, w, bias, dw, bias}, a);
  EXPECT_EQ(to_ints(m[0].sizes), (std::vector<int64_t>{1, 2, 4, 4, 16}));
  try {
    def.shape(std::vector<Tensor>{x, w, bias, empty(to_shape({32, 1, 5, 5}), DType::f32), bias}, a);
    ADD_FAILURE() << "a 5x5 depthwise weight was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[conv2d_1x1_dw_blocked] dw_weight"), std::string::npos)
        << e.what();
  }
  Attrs bad = a;
  bad.set("dw_stride", int64_t{3});
  EXPECT_THROW(def.shape(std::vector<Tensor>{x, w, bias, dw, bias}, bad), Error);
}

}  // namespace
