// Pass merge_linear: linears sharing an input with frozen weights become one linear and slices,
// on a hand-built graph (which nodes merge and which stay, verified, run before / after on
// random data on the interpreter and the planned executor) and on bert (Q, K, V merged, the
// compiled model equal to eager) and vit (already one qkv linear: nothing to merge).
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>

#include "lathe/backend/backend.h"
#include "lathe/backend/cpu/cpu_backend.h"
#include "lathe/backend/cpu/executor.h"
#include "lathe/backend/cpu/merge_linear.h"
#include "lathe/core/grad_mode.h"
#include "lathe/core/random.h"
#include "lathe/ir/graph.h"
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

using lathe::testing::max_rel_diff;

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
    return g->add_node(def, std::move(in), std::move(a), {t})->output();
  }
};

int count(const ir::Graph& g, const std::string& op) {
  int n = 0;
  for (const ir::Node* node : g.nodes()) n += node->op().name == op;
  return n;
}

std::vector<Tensor> with_constants(const ir::Graph& g, std::vector<Tensor> inputs,
                                   const backend::cpu::GraphConstants& constants) {
  for (size_t i = inputs.size(); i < g.inputs().size(); ++i) inputs.push_back(constants.at(i));
  return inputs;
}

TEST(MergeLinearPass, MergesLinearsOnOneInputAndKeepsTheRest) {
  Built b;
  ir::Value* x = b.input(rnd({2, 5, 16}, 1), false);
  ir::Value* wq = b.input(rnd({16, 16}, 2), true);
  ir::Value* bq = b.input(rnd({16}, 3), true);
  ir::Value* wk = b.input(rnd({8, 16}, 4), true);  // no bias: zeros in the merged bias
  ir::Value* wv = b.input(rnd({24, 16}, 5), true);
  ir::Value* bv = b.input(rnd({24}, 6), true);
  ir::Value* wg1 = b.input(rnd({12, 16}, 7), true);
  ir::Value* wg2 = b.input(rnd({4, 16}, 8), true);
  ir::Value* w_arg = b.input(rnd({16, 16}, 9), false);  // not frozen: stays alone
  ir::Value* wo = b.input(rnd({6, 16}, 10), true);      // its output is a graph output
  ir::Value* q = b.node("linear", {x, wq, bq}, Attrs{});
  ir::Value* k = b.node("linear", {x, wk, nullptr}, Attrs{});
  ir::Value* v = b.node("linear", {x, wv, bv}, Attrs{});
  ir::Value* g1 = b.node("linear_fused", {x, wg1, nullptr, nullptr}, Attrs{{"act", "gelu"}});
  ir::Value* g2 = b.node("linear_fused", {x, wg2, nullptr, nullptr}, Attrs{{"act", "gelu"}});
  ir::Value* a = b.node("linear", {x, w_arg, nullptr}, Attrs{});
  ir::Value* o = b.node("linear", {x, wo, nullptr}, Attrs{});
  // q, k, v as bert splits them: heads of 4, then attention-like products.
  auto heads = [&](ir::Value* t, int64_t n) {
    ir::Value* h = b.node("view", {t}, Attrs{{"size", Shape{2, 5, n / 4, 4}}});
    return b.node("permute", {h}, Attrs{{"dims", Shape{0, 2, 1, 3}}});
  };
  ir::Value* qk = b.node("add", {q, a}, Attrs{{"alpha", 1.0}});
  ir::Value* kk = b.node("mul", {heads(k, 8), heads(k, 8)}, Attrs{});
  b.g->set_outputs({qk, kk, b.node("relu", {heads(v, 24)}, Attrs{}), b.node("neg", {g1}, Attrs{}),
                    b.node("neg", {g2}, Attrs{}), o});
  b.g->verify();

  backend::cpu::GraphConstants constants = b.constants;
  backend::cpu::MergeLinearStats s;
  auto merged = backend::cpu::merge_linear(*b.g, constants, &s);
  merged->verify();
  EXPECT_EQ(s.groups, 2);  // {q, k, v} and {g1, g2}
  EXPECT_EQ(s.merged, 5);
  EXPECT_EQ(count(*merged, "linear"), 3);  // merged qkv, the unfrozen one, the graph output
  EXPECT_EQ(count(*merged, "linear_fused"), 1);
  EXPECT_EQ(count(*merged, "slice"), 5);
  ASSERT_EQ(constants.size(), merged->inputs().size());

  auto want = backend::create_backend("interpreter")->compile(*b.g)->run(b.inputs, {});
  const std::vector<Tensor> in = with_constants(*merged, b.inputs, constants);
  auto interp = backend::create_backend("interpreter")->compile(*merged)->run(in, {});
  auto exe = backend::cpu::make_planned_executable(*merged);
  for (int call = 0; call < 2; ++call) {  // the planned call reuses the recorded plan
    auto got = exe->run(in, {});
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_LT(max_rel_diff(got[i], want[i]), 1e-5) << "output " << i;
      EXPECT_LT(max_rel_diff(interp[i], want[i]), 1e-5) << "output " << i;
    }
  }
}

TEST(MergeLinearPass, NeedsFrozenWeights) {
  Built b;
  ir::Value* x = b.input(rnd({3, 8}, 1), false);
  ir::Value* w1 = b.input(rnd({8, 8}, 2), false);
  ir::Value* w2 = b.input(rnd({8, 8}, 3), false);
  b.g->set_outputs({b.node("relu", {b.node("linear", {x, w1, nullptr}, Attrs{})}, Attrs{}),
                    b.node("relu", {b.node("linear", {x, w2, nullptr}, Attrs{})}, Attrs{})});
  backend::cpu::GraphConstants constants = b.constants;
  backend::cpu::MergeLinearStats s;
  auto out = backend::cpu::merge_linear(*b.g, constants, &s);
  EXPECT_EQ(s.groups, 0);
  EXPECT_EQ(count(*out, "linear"), 2);
}

// Records the optimized graph's op names (the cpu pipeline with the compile's constants), then
// compiles with the cpu backend.
std::mutex g_mu;
std::vector<std::string> g_ops;

class RecordingBackend final : public backend::Backend {
 public:
  std::string name() const override { return "record_merge_linear"; }
  bool uses_constants() const override { return true; }
  std::unique_ptr<backend::Executable> compile(const ir::Graph& graph) override {
    return compile_with_context(graph, {});
  }
  std::unique_ptr<backend::Executable> compile_with_context(
      const ir::Graph& graph, const backend::CompileContext& context) override {
    backend::cpu::GraphConstants constants = context.constants;
    auto g = backend::cpu::run_passes(graph, constants, disabled_);
    {
      std::lock_guard<std::mutex> lock(g_mu);
      g_ops.clear();
      for (const ir::Node* n : g->nodes()) g_ops.push_back(n->op().name);
    }
    return backend::create_backend("cpu")->compile_with_context(graph, context);
  }
  static std::vector<std::string> disabled_;
};
std::vector<std::string> RecordingBackend::disabled_;

int recorded(const std::string& op) {
  return static_cast<int>(std::count(g_ops.begin(), g_ops.end(), op));
}

class MergeLinearZoo : public ::testing::TestWithParam<std::string> {};

TEST_P(MergeLinearZoo, TheFrozenModelEqualsEager) {
  static bool registered = [] {
    backend::register_backend("record_merge_linear",
                              [] { return std::make_unique<RecordingBackend>(); });
    return true;
  }();
  (void)registered;
  const std::string name = GetParam();
  auto spec = test_models::small_model(name, 3, 256);
  spec->module->eval();
  NoGradGuard no_grad;
  CompileOptions o;
  o.backend = "record_merge_linear";
  auto f = compile(spec->module, o);
  models::InputOptions io;
  io.image_size = 0;
  io.seq_len = 12;
  if (name == "bert") io.bert = test_models::small_bert(256);
  if (name == "vit") io.vit = test_models::small_vit();
  auto in = models::default_inputs(name, 2, 1, io);
  auto want = spec->forward(in);
  auto got = f(in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_LT(max_rel_diff(got[i], want[i]), 1e-4) << name << " output " << i;
  const int layers = name == "bert" ? test_models::small_bert(256).num_hidden_layers
                                    : test_models::small_vit().depth;
  // bert: per layer one linear for Q, K, V (three slices); vit has one qkv linear already.
  if (name == "bert") {
    EXPECT_EQ(recorded("slice"), 3 * layers) << "Q, K, V not merged in every layer";
  } else {
    EXPECT_EQ(recorded("slice"), 0);
  }
  EXPECT_EQ(recorded("sdpa_fused"), layers);
}

INSTANTIATE_TEST_SUITE_P(Zoo, MergeLinearZoo, ::testing::Values("bert", "vit"));

}  // namespace
