// The plan_layouts pass: chains of conv2d_fused run on oneDNN's blocked layout with reorders only
// at the region's edges (graph in, graph out, verified, and run before / after on random data).
#include <gtest/gtest.h>

#include <cmath>

#include "lathe/backend/backend.h"
#include "lathe/backend/cpu/plan_layouts.h"
#include "lathe/core/random.h"
#include "lathe/ir/graph.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"

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

double max_rel_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i)
    m = std::max(m, std::abs(x[i] - y[i]) / (1.0 + std::abs(y[i])));
  return m;
}

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
  auto out = backend::cpu::plan_layouts(*b.g, &s, 8);
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
  auto out = backend::cpu::plan_layouts(*b.g, &s, 16);
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
  auto out = backend::cpu::plan_layouts(*b.g, &s, 0);
  EXPECT_EQ(op_names(*out), op_names(*b.g));
  EXPECT_EQ(s.blocked_convs, 0);
  EXPECT_THROW(backend::cpu::plan_layouts(*b.g, &s, 4), Error);
  const int preferred = backend::cpu::plan_layouts_block();
  EXPECT_TRUE(preferred == 0 || preferred == 8 || preferred == 16) << preferred;
}

TEST(PlanLayoutsPass, AValueReadOutsideTheRegionIsReorderedBack) {
  Built b = block(true);
  backend::cpu::PlanLayoutsStats s;
  auto out = backend::cpu::plan_layouts(*b.g, &s, 8);
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
  auto out = backend::cpu::plan_layouts(*b.g, &s, 8);
  EXPECT_EQ(op_names(*out), (std::vector<std::string>{"conv2d_fused", "conv2d_fused"}));
  EXPECT_EQ(s.blocked_convs, 0);
}

}  // namespace
