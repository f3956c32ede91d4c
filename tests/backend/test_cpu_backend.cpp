// The optimizing CPU backend: the conv2d_fused op against the ops it replaces, the fuse_conv pass
// on hand-built graphs (what it fuses and what it must leave alone), and the ten zoo models
// compiled with backend "cpu" against eager (batch norms given non-trivial statistics, so the
// folding is exercised).
#include <gtest/gtest.h>

#include <cmath>

#include "lathe/backend/backend.h"
#include "lathe/backend/cpu/cpu_backend.h"
#include "lathe/backend/cpu/fuse_conv.h"
#include "lathe/backend/cpu/fuse_linear.h"
#include "lathe/core/random.h"
#include "lathe/ir/graph.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"
#include "lathe/trace/compile.h"
#include "tests/backend/backend_test_util.h"
#include "tests/models/small_models.h"

using namespace lathe;

namespace {

Tensor rnd(const std::vector<int64_t>& shape, uint64_t seed, DType dt = DType::f32) {
  Generator g(seed);
  return randn(to_shape(shape), dt, &g);
}

Tensor positive(const std::vector<int64_t>& shape, uint64_t seed, DType dt = DType::f32) {
  Generator g(seed);
  return rand(to_shape(shape), dt, &g) + 0.5;
}

using lathe::testing::max_rel_diff;

struct FusedCase {
  bool bn, residual;
  std::string act, act2;
  DType dtype;
  bool channels_last;
  int64_t groups;
};

Tensor apply_act(const Tensor& x, const std::string& act) {
  if (act == "relu") return relu(x);
  if (act == "clip") return hardtanh(x, 0.0, 6.0);
  return x;
}

class ConvFused : public ::testing::TestWithParam<FusedCase> {};

TEST_P(ConvFused, EqualsTheOpsItReplaces) {
  const FusedCase c = GetParam();
  Tensor x = rnd({2, 8, 9, 9}, 1, c.dtype);
  if (c.channels_last) x = x.to_channels_last();
  Tensor w = rnd({12, 8 / c.groups, 3, 3}, 2, c.dtype), b = rnd({12}, 3, c.dtype);
  Tensor mean = rnd({12}, 4, c.dtype), var = positive({12}, 5, c.dtype);
  Tensor gamma = rnd({12}, 6, c.dtype), beta = rnd({12}, 7, c.dtype);
  Tensor res = rnd({2, 12, 5, 5}, 8, c.dtype);
  // Reference: the separate ops.
  Tensor y = conv2d(x, w, b, {2, 2}, {1, 1}, {1, 1}, c.groups);
  if (c.bn) y = batch_norm(y, mean, var, gamma, beta, false, 0.1, 1e-5);
  y = apply_act(y, c.act);
  if (c.residual) y = add(y, res);
  y = apply_act(y, c.act2);
  // Fused.
  std::vector<Tensor> in{x, w, b};
  for (const Tensor& t : {mean, var, gamma, beta}) in.push_back(c.bn ? t : Tensor());
  in.push_back(c.residual ? res : Tensor());
  Attrs attrs{{"stride", Shape{2, 2}},
              {"padding", Shape{1, 1}},
              {"dilation", Shape{1, 1}},
              {"groups", c.groups},
              {"eps", 1e-5},
              {"act", c.act},
              {"act_min", 0.0},
              {"act_max", 6.0},
              {"act2", c.act2},
              {"act2_min", 0.0},
              {"act2_max", 6.0}};
  Tensor f = dispatch1(LATHE_OP("conv2d_fused"), in, attrs);
  EXPECT_LT(max_rel_diff(f, y), c.dtype == DType::f64 ? 1e-12 : 2e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ConvFused,
    ::testing::Values(FusedCase{true, false, "relu", "none", DType::f32, true, 1},
                      FusedCase{true, true, "none", "relu", DType::f32, true, 1},
                      FusedCase{true, true, "clip", "clip", DType::f32, false, 1},
                      FusedCase{false, true, "relu", "none", DType::f32, true, 4},
                      FusedCase{true, false, "clip", "none", DType::f32, true, 4},
                      FusedCase{false, false, "relu", "none", DType::f32, false, 1},
                      FusedCase{true, true, "relu", "relu", DType::f64, true, 2},
                      FusedCase{true, false, "none", "none", DType::f64, false, 1}),
    [](const ::testing::TestParamInfo<FusedCase>& info) {
      const FusedCase& c = info.param;
      return std::string(c.bn ? "bn_" : "") + c.act + (c.residual ? "_residual_" : "_") + c.act2 +
             (c.dtype == DType::f64 ? "_f64" : "_f32") + (c.channels_last ? "_nhwc" : "_nchw") +
             "_g" + std::to_string(c.groups) + "_" + std::to_string(info.index);
    });

TEST(ConvFused, FoldedWeightsFollowInPlaceUpdates) {
  Tensor x = rnd({1, 4, 6, 6}, 1).to_channels_last();
  Tensor w = rnd({4, 4, 3, 3}, 2), mean = rnd({4}, 3), var = positive({4}, 4);
  Tensor gamma = rnd({4}, 5), beta = rnd({4}, 6);
  auto fused = [&] {
    std::vector<Tensor> in{x, w, Tensor(), mean, var, gamma, beta, Tensor()};
    Attrs a{{"stride", Shape{1, 1}},
            {"padding", Shape{1, 1}},
            {"dilation", Shape{1, 1}},
            {"groups", int64_t{1}},
            {"eps", 1e-5},
            {"act", std::string("none")},
            {"act_min", 0.0},
            {"act_max", 0.0},
            {"act2", std::string("none")},
            {"act2_min", 0.0},
            {"act2_max", 0.0}};
    return dispatch1(LATHE_OP("conv2d_fused"), in, a);
  };
  auto reference = [&] {
    return batch_norm(conv2d(x, w, {}, {1, 1}, {1, 1}), mean, var, gamma, beta, false, 0.1, 1e-5);
  };
  EXPECT_LT(max_rel_diff(fused(), reference()), 2e-5);
  mul_(gamma, 3.0);  // an in-place update of a batch-norm parameter
  EXPECT_LT(max_rel_diff(fused(), reference()), 2e-5);
  mul_(w, -1.0);  // and of the weight
  EXPECT_LT(max_rel_diff(fused(), reference()), 2e-5);
}

TEST(ConvFused, ShapeRuleErrors) {
  Tensor x = rnd({1, 4, 6, 6}, 1), w = rnd({4, 4, 3, 3}, 2);
  auto attrs = [](const char* act) {
    return Attrs{{"stride", Shape{1, 1}},
                 {"padding", Shape{1, 1}},
                 {"dilation", Shape{1, 1}},
                 {"groups", int64_t{1}},
                 {"eps", 1e-5},
                 {"act", std::string(act)},
                 {"act_min", 0.0},
                 {"act_max", 0.0},
                 {"act2", std::string("none")},
                 {"act2_min", 0.0},
                 {"act2_max", 0.0}};
  };
  std::vector<Tensor> bad_mean{x,           w,        Tensor(), rnd({5}, 3),
                               rnd({4}, 4), Tensor(), Tensor(), Tensor()};
  EXPECT_THROW(dispatch1(LATHE_OP("conv2d_fused"), bad_mean, attrs("none")), Error);
  std::vector<Tensor> bad_res{x,        w,        Tensor(), Tensor(),
                              Tensor(), Tensor(), Tensor(), rnd({1, 4, 5, 5}, 5)};
  EXPECT_THROW(dispatch1(LATHE_OP("conv2d_fused"), bad_res, attrs("none")), Error);
  std::vector<Tensor> plain{x, w, Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
  try {
    dispatch1(LATHE_OP("conv2d_fused"), plain, attrs("swish"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("act must be none, relu, clip, gelu or gelu_tanh, got 'swish'"),
        std::string::npos)
        << e.what();
  }
}

// ---- the pass on hand-built graphs ----

ir::ValueType type_of(const Tensor& t) { return ir::ValueType::of(t); }

struct Built {
  std::unique_ptr<ir::Graph> g = std::make_unique<ir::Graph>();
  std::vector<Tensor> inputs;
  ir::Value* input(const Tensor& t) {
    inputs.push_back(t);
    return g->add_input(type_of(t), ir::InputSource{ir::InputSource::Kind::argument,
                                                    static_cast<int>(inputs.size() - 1), ""});
  }
  ir::Value* node(const char* op, std::vector<ir::Value*> in, Attrs a) {
    const OpDef& def = OpRegistry::global().get(op);
    std::vector<Tensor> fakes;  // shape rule on real tensors of the input types
    for (ir::Value* v : in)
      fakes.push_back(v ? empty_strided(v->type().sizes,
                                        v->type().strides.empty()
                                            ? contiguous_strides(v->type().sizes)
                                            : v->type().strides,
                                        v->type().dtype)
                        : Tensor());
    std::vector<TensorMeta> m = def.shape(fakes, a);
    ir::ValueType t;
    t.dtype = m[0].dtype;
    t.sizes = m[0].sizes;
    t.strides = m[0].strides;
    return g->add_node(def, std::move(in), std::move(a), {t})->output();
  }
};

Attrs conv_attrs() {
  return Attrs{{"stride", Shape{1, 1}},
               {"padding", Shape{1, 1}},
               {"dilation", Shape{1, 1}},
               {"groups", int64_t{1}}};
}
Attrs bn_attrs(bool training = false) {
  return Attrs{{"training", training}, {"momentum", 0.1}, {"eps", 1e-5}};
}

std::vector<std::string> op_names(const ir::Graph& g) {
  std::vector<std::string> names;
  for (const ir::Node* n : g.nodes()) names.push_back(n->op().name);
  return names;
}

std::vector<Tensor> run(const ir::Graph& g, const std::vector<Tensor>& in) {
  return backend::create_backend("interpreter")->compile(g)->run(in, {});
}

// conv -> bn -> relu -> add(residual) -> relu, as a resnet block ends.
Built resnet_tail(bool extra_user) {
  Built b;
  ir::Value* x = b.input(rnd({2, 4, 6, 6}, 1).to_channels_last());
  ir::Value* w = b.input(rnd({4, 4, 3, 3}, 2));
  ir::Value* mean = b.input(rnd({4}, 3));
  ir::Value* var = b.input(positive({4}, 4));
  ir::Value* gamma = b.input(rnd({4}, 5));
  ir::Value* beta = b.input(rnd({4}, 6));
  ir::Value* c = b.node("conv2d", {x, w, nullptr}, conv_attrs());
  ir::Value* n = b.node("batch_norm", {c, mean, var, gamma, beta}, bn_attrs());
  ir::Value* s = b.node("add", {n, x}, Attrs{});
  ir::Value* r = b.node("relu", {s}, Attrs{});
  std::vector<ir::Value*> outs{r};
  if (extra_user) outs.push_back(n);  // the batch norm's result is needed elsewhere
  b.g->set_outputs(outs);
  return b;
}

TEST(FuseConvPass, FusesAResNetTailIntoOneNode) {
  Built b = resnet_tail(false);
  backend::cpu::FuseConvStats stats;
  auto fused = backend::cpu::fuse_conv(*b.g, &stats);
  fused->verify();
  EXPECT_EQ(op_names(*fused), std::vector<std::string>{"conv2d_fused"});
  EXPECT_EQ(stats.fused, 1);
  EXPECT_EQ(stats.bn_folded, 1);
  EXPECT_EQ(stats.residual, 1);
  EXPECT_LT(max_rel_diff(run(*fused, b.inputs)[0], run(*b.g, b.inputs)[0]), 2e-5);
}

TEST(FuseConvPass, StopsWhereAValueHasAnotherUser) {
  Built b = resnet_tail(true);
  auto fused = backend::cpu::fuse_conv(*b.g);
  fused->verify();
  EXPECT_EQ(op_names(*fused), (std::vector<std::string>{"conv2d_fused", "add", "relu"}));
  auto want = run(*b.g, b.inputs), got = run(*fused, b.inputs);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_LT(max_rel_diff(got[i], want[i]), 2e-5);
}

TEST(FuseConvPass, LeavesTrainingBatchNormAndBroadcastAddsAlone) {
  Built b;
  ir::Value* x = b.input(rnd({2, 4, 6, 6}, 1));
  ir::Value* w = b.input(rnd({4, 4, 3, 3}, 2));
  ir::Value* mean = b.input(rnd({4}, 3));
  ir::Value* var = b.input(positive({4}, 4));
  ir::Value* bias4 = b.input(rnd({4, 1, 1}, 5));
  ir::Value* c = b.node("conv2d", {x, w, nullptr}, conv_attrs());
  ir::Value* n = b.node("batch_norm", {c, mean, var, nullptr, nullptr}, bn_attrs(true));
  ir::Value* c2 = b.node("conv2d", {n, w, nullptr}, conv_attrs());
  ir::Value* s = b.node("add", {c2, bias4}, Attrs{});  // broadcasts: not a residual
  b.g->set_outputs({s});
  auto fused = backend::cpu::fuse_conv(*b.g);
  EXPECT_EQ(op_names(*fused), (std::vector<std::string>{"conv2d", "batch_norm", "conv2d", "add"}));
}

// linear -> gelu, and linear -> add(residual), as a transformer's MLP and output projection.
TEST(FuseLinearPass, FusesActivationsAndResidualAdds) {
  for (const char* approx : {"none", "tanh"}) {
    Built b;
    ir::Value* x = b.input(rnd({2, 5, 8}, 1));
    ir::Value* w1 = b.input(rnd({16, 8}, 2));
    ir::Value* b1 = b.input(rnd({16}, 3));
    ir::Value* w2 = b.input(rnd({8, 16}, 4));
    ir::Value* h = b.node("linear", {x, w1, b1}, Attrs{});
    ir::Value* a = b.node("gelu", {h}, Attrs{{"approximate", std::string(approx)}});
    ir::Value* y = b.node("linear", {a, w2, nullptr}, Attrs{});
    ir::Value* s = b.node("add", {x, y}, Attrs{});
    b.g->set_outputs({s});
    backend::cpu::FuseLinearStats stats;
    auto fused = backend::cpu::fuse_linear(*b.g, &stats);
    fused->verify();
    EXPECT_EQ(op_names(*fused), (std::vector<std::string>{"linear_fused", "linear_fused"}));
    EXPECT_EQ(stats.act, 1);
    EXPECT_EQ(stats.residual, 1);
    EXPECT_LT(max_rel_diff(run(*fused, b.inputs)[0], run(*b.g, b.inputs)[0]), 2e-5) << approx;
  }
}

TEST(CpuBackend, PipelineNamesAndDisabling) {
  EXPECT_EQ(backend::cpu::pass_names(),
            (std::vector<std::string>{"functionalize", "constant_fold", "fold_batch_norm",
                                      "fuse_conv", "fuse_linear", "fuse_attention",
                                      "fuse_pointwise", "merge_linear", "plan_layouts",
                                      "concat_blocked", "fuse_dw_conv", "lower_precision", "dce"}));
  Built b = resnet_tail(false);
  auto off = backend::cpu::run_passes(*b.g, {"fuse_conv", "fuse_pointwise"});
  EXPECT_EQ(op_names(*off), (std::vector<std::string>{"conv2d", "batch_norm", "add", "relu"}));
  auto on = backend::cpu::run_passes(*b.g);
  EXPECT_EQ(op_names(*on), std::vector<std::string>{"conv2d_fused"});
  EXPECT_THROW(backend::cpu::run_passes(*b.g, {"no_such_pass"}), Error);
}

// ---- the zoo through compile(backend = "cpu") ----

// Batch norms with statistics and affine parameters far from the defaults (0, 1, 1, 0).
void randomize_batch_norms(nn::Module& m, uint64_t seed) {
  Generator g(seed);
  for (auto& [name, t] : m.named_buffers()) {
    if (t.dtype() != DType::f32) continue;
    if (name.find("running_var") != std::string::npos)
      g.fill_uniform(t, 0.5, 2.0);
    else if (name.find("running_mean") != std::string::npos)
      g.fill_normal(t, 0.0, 0.5);
  }
  for (auto& [name, t] : m.named_parameters())
    if (t.dim() == 1 && name.find("bn") != std::string::npos) g.fill_normal(t, 0.5, 0.5);
}

class CpuBackendZoo : public ::testing::TestWithParam<std::string> {};

TEST_P(CpuBackendZoo, EqualsEager) {
  const std::string name = GetParam();
  auto spec = test_models::small_model(name, 3, 256);
  randomize_batch_norms(*spec->module, 11);
  CompileOptions o;
  o.backend = "cpu";
  auto f = compile(spec->module, o);
  for (uint64_t seed : {1, 2}) {
    models::InputOptions io;
    io.image_size = name == "vit" ? 0 : 64;
    io.seq_len = 12;
    if (name == "bert") io.bert = test_models::small_bert(256);
    if (name == "vit") io.vit = test_models::small_vit();
    auto in = models::default_inputs(name, 2, seed, io);
    auto want = spec->forward(in);
    auto got = f(in);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_LT(max_rel_diff(got[i], want[i]), 1e-4) << name << " output " << i;
  }
  EXPECT_EQ(f.stats().compiles, 1);
}

INSTANTIATE_TEST_SUITE_P(Zoo, CpuBackendZoo,
                         ::testing::Values("resnet18", "resnet50", "resnext50_32x4d", "alexnet",
                                           "vgg16", "mobilenet_v2", "mnasnet1_0", "squeezenet1_1",
                                           "bert", "vit"));

}  // namespace
