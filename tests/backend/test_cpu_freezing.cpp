// Freezing in the cpu backend: the constant_fold and fold_batch_norm passes on hand-built graphs
// (graph in, graph out, verified, and run before / after on random data), compile() handing the
// captured parameters and buffers to the backend as constants in eval mode without grad (an
// in-place update between calls re-freezes), and the ten zoo models frozen against eager.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "lathe/backend/backend.h"
#include "lathe/backend/cpu/constant_fold.h"
#include "lathe/backend/cpu/cpu_backend.h"
#include "lathe/backend/cpu/fold_batch_norm.h"
#include "lathe/core/grad_mode.h"
#include "lathe/core/random.h"
#include "lathe/ir/graph.h"
#include "lathe/nn/layers.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"
#include "lathe/trace/compile.h"
#include "tests/backend/backend_test_util.h"
#include "tests/models/small_models.h"

using namespace lathe;

namespace {

Tensor rnd(const std::vector<int64_t>& shape, uint64_t seed) {
  Generator g(seed);
  return randn(to_shape(shape), DType::f32, &g);
}

Tensor positive(const std::vector<int64_t>& shape, uint64_t seed) {
  Generator g(seed);
  return rand(to_shape(shape), DType::f32, &g) + 0.5;
}

using lathe::testing::max_rel_diff;

// A graph under construction whose inputs are arguments or frozen constants.
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
    return g->add_node(def, std::move(in), std::move(a), {t})->output();
  }
};

std::vector<std::string> op_names(const ir::Graph& g) {
  std::vector<std::string> names;
  for (const ir::Node* n : g.nodes()) names.push_back(n->op().name);
  return names;
}

// Runs g with the caller's inputs followed by the constants a pass appended.
std::vector<Tensor> run(const ir::Graph& g, std::vector<Tensor> inputs,
                        const backend::cpu::GraphConstants& constants) {
  for (size_t i = inputs.size(); i < g.inputs().size(); ++i) inputs.push_back(constants.at(i));
  return backend::create_backend("interpreter")->compile(g)->run(inputs, {});
}

Attrs conv_attrs(int64_t groups = 1) {
  return Attrs{{"stride", Shape{1, 1}},
               {"padding", Shape{1, 1}},
               {"dilation", Shape{1, 1}},
               {"groups", groups}};
}

// conv(x, w, b) -> batch_norm -> relu, every parameter a constant unless `mean_constant` is off.
Built conv_bn_relu(bool mean_constant, bool with_bias, int64_t groups) {
  Built b;
  ir::Value* x = b.input(rnd({2, 4, 7, 7}, 1).to_channels_last(), false);
  ir::Value* w = b.input(rnd({8, 4 / groups, 3, 3}, 2), true);
  ir::Value* bias = with_bias ? b.input(rnd({8}, 3), true) : nullptr;
  ir::Value* mean = b.input(rnd({8}, 4), mean_constant);
  ir::Value* var = b.input(positive({8}, 5), true);
  ir::Value* gamma = b.input(rnd({8}, 6), true);
  ir::Value* beta = b.input(rnd({8}, 7), true);
  ir::Value* c = b.node("conv2d", {x, w, bias}, conv_attrs(groups));
  ir::Value* n = b.node("batch_norm", {c, mean, var, gamma, beta},
                        Attrs{{"training", false}, {"momentum", 0.1}, {"eps", 1e-3}});
  b.g->set_outputs({b.node("relu", {n}, Attrs{})});
  return b;
}

TEST(FoldBatchNormPass, FoldsIntoTheConvolution) {
  for (bool with_bias : {false, true}) {
    for (int64_t groups : {1, 2}) {
      Built b = conv_bn_relu(true, with_bias, groups);
      backend::cpu::GraphConstants constants = b.constants;
      int folded = 0;
      auto out = backend::cpu::fold_batch_norm(*b.g, constants, &folded);
      out->verify();
      EXPECT_EQ(folded, 1);
      EXPECT_EQ(op_names(*out), (std::vector<std::string>{"conv2d", "relu"}));
      ASSERT_EQ(constants.size(), out->inputs().size());
      EXPECT_EQ(out->inputs().size(), b.g->inputs().size() + 2);  // the folded weight and bias
      EXPECT_LT(
          max_rel_diff(run(*out, b.inputs, constants)[0], run(*b.g, b.inputs, b.constants)[0]),
          2e-5)
          << with_bias << " " << groups;
    }
  }
}

TEST(FoldBatchNormPass, LeavesStatisticsThatAreNotConstants) {
  Built b = conv_bn_relu(false, true, 1);
  backend::cpu::GraphConstants constants = b.constants;
  int folded = -1;
  auto out = backend::cpu::fold_batch_norm(*b.g, constants, &folded);
  EXPECT_EQ(folded, 0);
  EXPECT_EQ(op_names(*out), (std::vector<std::string>{"conv2d", "batch_norm", "relu"}));
}

TEST(ConstantFoldPass, RunsWorkOnConstantsAtCompileTime) {
  Built b;
  ir::Value* x = b.input(rnd({3, 5}, 1), false);
  ir::Value* w = b.input(rnd({6, 5}, 2), true);
  ir::Value* s = b.input(rnd({6}, 3), true);
  ir::Value* wt = b.node("permute", {w}, Attrs{{"dims", Shape{1, 0}}});
  ir::Value* s2 = b.node("mul", {s, s}, Attrs{});
  ir::Value* y = b.node("matmul", {x, wt}, Attrs{});
  b.g->set_outputs({b.node("add", {y, s2}, Attrs{})});
  backend::cpu::GraphConstants constants = b.constants;
  int folded = 0;
  auto out = backend::cpu::constant_fold(*b.g, constants, &folded);
  out->verify();
  EXPECT_EQ(folded, 2);
  EXPECT_EQ(op_names(*out), (std::vector<std::string>{"matmul", "add"}));
  EXPECT_LT(max_rel_diff(run(*out, b.inputs, constants)[0], run(*b.g, b.inputs, b.constants)[0]),
            1e-6);
  // Nothing is constant: nothing changes.
  backend::cpu::GraphConstants none;
  auto same = backend::cpu::constant_fold(*b.g, none, &folded);
  EXPECT_EQ(folded, 0);
  EXPECT_EQ(op_names(*same), op_names(*b.g));
}

TEST(CpuPipeline, FreezingPassesRunInOrderAndCanBeDisabled) {
  EXPECT_EQ(backend::cpu::pass_names(),
            (std::vector<std::string>{"functionalize", "constant_fold", "fold_batch_norm",
                                      "fuse_conv", "fuse_linear", "fuse_attention",
                                      "fuse_pointwise", "merge_linear", "plan_layouts",
                                      "concat_blocked", "fuse_dw_conv", "lower_precision", "dce"}));
  Built b = conv_bn_relu(true, true, 1);
  backend::cpu::GraphConstants constants = b.constants;
  auto on = backend::cpu::run_passes(*b.g, constants);
  EXPECT_EQ(op_names(*on), std::vector<std::string>{"conv2d_fused"});
  EXPECT_LT(max_rel_diff(run(*on, b.inputs, constants)[0], run(*b.g, b.inputs, b.constants)[0]),
            2e-5);
  // Without fold_batch_norm the batch norm goes into conv2d_fused (folded per call).
  backend::cpu::GraphConstants c2 = b.constants;
  auto off = backend::cpu::run_passes(*b.g, c2, {"fold_batch_norm"});
  ASSERT_EQ(off->nodes().size(), 1u);
  EXPECT_NE(off->nodes()[0]->inputs()[3], nullptr);  // bn_mean still an input
  EXPECT_EQ(c2.size(), b.g->inputs().size());
}

// A small conv net: conv -> bn -> relu -> conv -> bn (+ x) -> relu.
struct Block : nn::Module {
  std::shared_ptr<nn::Conv2d> c1, c2;
  std::shared_ptr<nn::BatchNorm2d> b1, b2;
  Block() {
    c1 = register_module("c1", std::make_shared<nn::Conv2d>(4, 4, 3, 1, 1, 1, false));
    b1 = register_module("b1", std::make_shared<nn::BatchNorm2d>(4));
    c2 = register_module("c2", std::make_shared<nn::Conv2d>(4, 4, 3, 1, 1, 1, false));
    b2 = register_module("b2", std::make_shared<nn::BatchNorm2d>(4));
  }
  std::string type_name() const override { return "Block"; }
  Tensor forward(const Tensor& x) override {
    return relu(add(b2->forward(c2->forward(relu(b1->forward(c1->forward(x))))), x));
  }
};

TEST(Freezing, InPlaceUpdateOfAFrozenWeightRefreezes) {
  auto m = std::make_shared<Block>();
  m->eval();
  Generator g(5);
  for (auto& [name, t] : m->named_buffers())
    if (name.find("running_var") != std::string::npos) g.fill_uniform(t, 0.5, 2.0);
  NoGradGuard no_grad;
  CompileOptions o;
  o.backend = "cpu";
  auto f = compile([m](const std::vector<Tensor>& x) { return m->forward(x[0]); }, o);
  Tensor x = rnd({1, 4, 8, 8}, 9);
  EXPECT_LT(max_rel_diff(f({x})[0], m->forward(x)), 1e-5);
  EXPECT_NE(f.guards_string().find("frozen"), std::string::npos) << f.guards_string();
  for (int step = 0; step < 10; ++step) {  // more updates than the recompile limit
    mul_(m->c1->param("weight"), -1.5);
    add_(m->b2->buffer("running_mean"), rnd({4}, 20 + step), 0.25);
    Tensor want = m->forward(x);
    EXPECT_LT(max_rel_diff(f({x})[0], want), 1e-5) << "after update " << step;
  }
  EXPECT_EQ(f.num_entries(), 1u);  // stale entries are dropped, not kept
  EXPECT_EQ(f.stats().compiles, 11);
  EXPECT_EQ(f.stats().eager_calls, 0);
}

TEST(Freezing, GradEnabledWithTrainableParametersFreezesOnlyTheBuffers) {
  auto m = std::make_shared<Block>();
  m->eval();
  for (auto& [name, t] : m->named_parameters()) t.set_requires_grad(true);
  CompileOptions o;
  o.backend = "cpu";
  auto f = compile([m](const std::vector<Tensor>& x) { return m->forward(x[0]); }, o);
  Tensor x = rnd({1, 4, 8, 8}, 9);
  f({x});
  // The four running statistics (they do not require grad); no parameter.
  const std::string guards = f.guards_string();
  size_t frozen = 0;
  for (size_t p = guards.find("frozen,"); p != std::string::npos; p = guards.find("frozen,", p + 1))
    ++frozen;
  EXPECT_EQ(frozen, 4u) << guards;
}

// An inverted-residual block with frozen weights: its memory-bound convolutions make plan_layouts
// choose by measurement, so the backend times the other layout plans at compile time.
Built inverted_residual() {
  Built b;
  ir::Value* x = b.input(rnd({2, 16, 20, 20}, 1).to_channels_last(), false);
  ir::Value* w1 = b.input(rnd({48, 16, 1, 1}, 2), true);
  ir::Value* w2 = b.input(rnd({48, 1, 3, 3}, 3), true);
  ir::Value* w3 = b.input(rnd({16, 48, 1, 1}, 4), true);
  Attrs one{{"stride", Shape{1, 1}},
            {"padding", Shape{0, 0}},
            {"dilation", Shape{1, 1}},
            {"groups", int64_t{1}}};
  ir::Value* y = b.node("relu", {b.node("conv2d", {x, w1, nullptr}, one)}, Attrs{});
  y = b.node("relu", {b.node("conv2d", {y, w2, nullptr}, conv_attrs(48))}, Attrs{});
  b.g->set_outputs({b.node("add", {b.node("conv2d", {y, w3, nullptr}, one), x}, Attrs{})});
  return b;
}

struct EnvGuard {
  explicit EnvGuard(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~EnvGuard() { unsetenv(name_); }
  const char* name_;
};

TEST(LayoutTuning, EveryPlanComputesTheSameAndTuningCanBeTurnedOff) {
  Built b = inverted_residual();
  const Tensor want = run(*b.g, b.inputs, b.constants)[0];
  for (const char* tuning : {"1", "0"}) {
    EnvGuard e("LATHE_CPU_LAYOUT_TUNING", tuning);
    backend::CompileContext ctx;
    ctx.constants = b.constants;
    auto exe = backend::create_backend("cpu")->compile_with_context(*b.g, ctx);
    EXPECT_LT(max_rel_diff(exe->run(b.inputs, {})[0], want), 1e-4) << tuning;
  }
  // Each fixed plan the tuning tries.
  for (backend::cpu::LayoutPlan p : std::vector<backend::cpu::LayoutPlan>{
           {0, false}, {8, true}, {16, true}, {8, false}, {16, false}}) {
    backend::cpu::GraphConstants c = b.constants;
    backend::cpu::PipelineInfo info;
    auto g = backend::cpu::run_passes(*b.g, c, {}, &p, &info);
    EXPECT_FALSE(info.layout_measured);
    EXPECT_LT(max_rel_diff(run(*g, b.inputs, c)[0], want), 1e-4) << p.block << p.per_region;
  }
  backend::cpu::GraphConstants c = b.constants;
  backend::cpu::PipelineInfo info;
  backend::cpu::run_passes(*b.g, c, {}, nullptr, &info);
  EXPECT_TRUE(info.layout_measured) << "memory-bound convolutions, no Winograd";
  EXPECT_FALSE(info.layout.empty());
  EnvGuard e("LATHE_CPU_LAYOUT_TUNING", "2");
  backend::CompileContext ctx;
  ctx.constants = b.constants;
  EXPECT_THROW(backend::create_backend("cpu")->compile_with_context(*b.g, ctx), std::exception);
}

// Timing runs the graph: not one that draws random numbers or writes into an input.
TEST(LayoutTuning, DoesNotRunAGraphThatDrawsOrWrites) {
  Built b = inverted_residual();
  ir::Value* out = b.g->outputs()[0];
  b.g->set_outputs({b.node("dropout", {out}, Attrs{{"p", 0.5}})});
  const Generator::State before = default_generator().state();
  backend::CompileContext ctx;
  ctx.constants = b.constants;
  backend::create_backend("cpu")->compile_with_context(*b.g, ctx);
  const Generator::State after = default_generator().state();
  EXPECT_EQ(before.seed, after.seed);
  EXPECT_EQ(before.offset, after.offset) << "compiling drew random numbers";

  Built w = inverted_residual();
  ir::Value* y = w.g->outputs()[0];
  ir::Value* acc = w.input(zeros(to_shape({2, 16, 20, 20})).to_channels_last(), false);
  w.g->set_outputs({w.node("add_", {acc, y}, Attrs{{"alpha", 1.0}})});
  const Tensor acc_value = w.inputs.back();
  backend::CompileContext wctx;
  wctx.constants = w.constants;
  backend::create_backend("cpu")->compile_with_context(*w.g, wctx);
  for (double v : acc_value.to_vector<double>())
    ASSERT_EQ(v, 0.0) << "compiling wrote into an input";
}

class FrozenZoo : public ::testing::TestWithParam<std::string> {};

TEST_P(FrozenZoo, EqualsEager) {
  const std::string name = GetParam();
  auto spec = test_models::small_model(name, 3, 256);
  spec->module->eval();
  Generator g(11);
  for (auto& [n, t] : spec->module->named_buffers()) {
    if (t.dtype() != DType::f32) continue;
    if (n.find("running_var") != std::string::npos) g.fill_uniform(t, 0.5, 2.0);
    if (n.find("running_mean") != std::string::npos) g.fill_normal(t, 0.0, 0.5);
  }
  NoGradGuard no_grad;
  CompileOptions o;
  o.backend = "cpu";
  auto f = compile(spec->module, o);
  models::InputOptions io;
  io.image_size = name == "vit" ? 0 : 64;
  io.seq_len = 12;
  if (name == "bert") io.bert = test_models::small_bert(256);
  if (name == "vit") io.vit = test_models::small_vit();
  auto in = models::default_inputs(name, 2, 1, io);
  auto want = spec->forward(in);
  auto got = f(in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_LT(max_rel_diff(got[i], want[i]), 1e-4) << name << " output " << i;
  EXPECT_NE(f.guards_string().find("frozen"), std::string::npos);
  // A second call with new data hits the entry.
  auto in2 = models::default_inputs(name, 2, 2, io);
  auto want2 = spec->forward(in2);
  auto got2 = f(in2);
  for (size_t i = 0; i < got2.size(); ++i)
    EXPECT_LT(max_rel_diff(got2[i], want2[i]), 1e-4) << name << " output " << i;
  EXPECT_EQ(f.stats().compiles, 1);
}

INSTANTIATE_TEST_SUITE_P(Zoo, FrozenZoo,
                         ::testing::Values("resnet18", "resnet50", "resnext50_32x4d", "alexnet",
                                           "vgg16", "mobilenet_v2", "mnasnet1_0", "squeezenet1_1",
                                           "bert", "vit"));

}  // namespace
