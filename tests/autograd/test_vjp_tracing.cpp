// Each vjp rule runs under tracing (lathe::compile with every size symbolic) and gives eager's
// gradients: the rules are written with ops, so a traced joint graph can use them as they are.
#include <gtest/gtest.h>

#include "lathe/core/grad_mode.h"
#include "lathe/core/random.h"
#include "lathe/ops/autograd.h"
#include "lathe/ops/ops.h"
#include "lathe/trace/compile.h"
#include "tests/autograd/gradcheck.h"

using namespace lathe;
using lathe::testing::rnd;
using lathe::testing::uni;
using V = std::vector<Tensor>;

namespace {

// Records f's last op eagerly, then computes that op's vjp eagerly and compiled (dynamic sizes)
// on the same values and compares.
void check_vjp_traces(const std::string& name, const std::function<Tensor(const V&)>& f, V inputs,
                      bool expect_symbols = true) {
  SCOPED_TRACE(name);
  for (Tensor& t : inputs)
    if (is_floating(t.dtype())) t.set_requires_grad(true);
  Tensor y = f(inputs);
  ASSERT_FALSE(y.is_leaf());
  const std::shared_ptr<AutogradNode> node = autograd_meta(y.impl())->grad_fn;
  const OpDef* op = node->op;
  const Attrs attrs = node->attrs;
  // The op's own inputs: saved values, or random stand-ins where the vjp reads sizes only.
  std::vector<int> defined;
  V args;
  for (size_t i = 0; i < node->inputs.size(); ++i) {
    const SavedTensor& s = node->inputs[i];
    if (!s.value.defined()) continue;
    defined.push_back(static_cast<int>(i));
    Tensor a = s.has_data ? s.value.detach() : rnd(s.value.sizes(), 900 + i).to(s.value.dtype());
    args.push_back(a);
  }
  Generator gen(77);
  args.push_back(randn(y.sizes(), y.dtype(), &gen));
  const size_t n_inputs = node->inputs.size();
  auto grads = [op, attrs, defined, n_inputs](const V& a) {
    NoGradGuard no_grad;
    V ins(n_inputs);
    for (size_t k = 0; k < defined.size(); ++k) ins[defined[k]] = a[k];
    V outs = dispatch(*op, ins, attrs);
    std::vector<bool> needs(n_inputs);
    for (size_t i = 0; i < n_inputs; ++i)
      needs[i] = ins[i].defined() && is_floating(ins[i].dtype());
    const V gout{a.back()};
    V g = op->vjp(ins, outs, gout, attrs, needs);
    V r;
    for (size_t i = 0; i < g.size(); ++i)
      if (needs[i] && g[i].defined()) r.push_back(g[i]);
    return r;
  };
  const V want = grads(args);
  CompileOptions o;
  o.dynamic = DynamicPolicy::kDynamic;
  o.name = name;
  auto compiled = compile(grads, o);
  const V got = compiled(args);
  EXPECT_EQ(compiled.stats().compiles, 1);
  EXPECT_EQ(compiled.stats().eager_calls, 0);
  // Sizes of 2 or more are symbols (s0, s1, ...) unless a shape rule pins them.
  if (expect_symbols) {
    EXPECT_NE(compiled.graph_string().find("s0"), std::string::npos) << compiled.graph_string();
  }
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].shape(), want[i].shape()) << "gradient " << i;
    auto a = got[i].to_vector<double>(), b = want[i].to_vector<double>();
    for (size_t k = 0; k < a.size(); ++k)
      ASSERT_NEAR(a[k], b[k], 1e-9 * (1 + std::abs(b[k]))) << "gradient " << i << " element " << k;
  }
}

}  // namespace

TEST(VjpTracing, ElementwiseAndReductions) {
  const Tensor x = rnd({3, 4}, 1), y = rnd({4}, 2), pos = uni({3, 4}, 3, 0.5, 2.0);
  check_vjp_traces("add", [](const V& v) { return add(v[0], v[1], 2.0); }, {x, y});
  check_vjp_traces("mul", [](const V& v) { return mul(v[0], v[1]); }, {x, y});
  check_vjp_traces("div", [](const V& v) { return div(v[0], v[1]); }, {x, pos});
  check_vjp_traces("pow", [](const V& v) { return pow(v[0], v[1]); }, {pos, x});
  check_vjp_traces("maximum", [](const V& v) { return maximum(v[0], v[1]); }, {x, y});
  for (const char* u : {"relu", "gelu", "tanh", "sigmoid", "exp", "hardswish", "silu"}) {
    std::string op = u;
    check_vjp_traces(op,
                     [op](const V& v) {
                       if (op == "relu") return relu(v[0]);
                       if (op == "gelu") return gelu(v[0]);
                       if (op == "tanh") return tanh(v[0]);
                       if (op == "sigmoid") return sigmoid(v[0]);
                       if (op == "exp") return exp(v[0]);
                       if (op == "hardswish") return hardswish(v[0]);
                       return silu(v[0]);
                     },
                     {x});
  }
  check_vjp_traces("hardtanh", [](const V& v) { return relu6(v[0]); }, {mul(x, 5.0)});
  check_vjp_traces("sum", [](const V& v) { return sum(v[0], {1}); }, {x});
  check_vjp_traces("mean", [](const V& v) { return mean(v[0], {0}, true); }, {x});
  check_vjp_traces("amax", [](const V& v) { return amax(v[0], {1}); }, {x});
  check_vjp_traces("var", [](const V& v) { return var(v[0], {1}); }, {x});
}

TEST(VjpTracing, ShapesAndViews) {
  const Tensor x = rnd({2, 3, 4}, 10);
  check_vjp_traces("view", [](const V& v) { return v[0].view({6, 4}); }, {x});
  check_vjp_traces("permute", [](const V& v) { return v[0].permute({2, 0, 1}); }, {x});
  check_vjp_traces(
      "expand",
      [](const V& v) {
        return v[0].expand({3, 2, 4});
      },
      {rnd({2, 1}, 11)},
      /*expect_symbols=*/false);  // expand's target sizes are constants
  check_vjp_traces("unsqueeze", [](const V& v) { return v[0].unsqueeze(1); }, {x});
  check_vjp_traces("cat", [](const V& v) { return cat({v[0], v[1]}, 1); }, {x, rnd({2, 2, 4}, 12)});
}

TEST(VjpTracing, NeuralNetworkOps) {
  check_vjp_traces("matmul", [](const V& v) { return matmul(v[0], v[1]); },
                   {rnd({2, 3, 4}, 20), rnd({4, 5}, 21)});
  check_vjp_traces("linear", [](const V& v) { return linear(v[0], v[1], v[2]); },
                   {rnd({2, 3, 4}, 22), rnd({5, 4}, 23), rnd({5}, 24)});
  check_vjp_traces(
      "conv2d",
      [](const V& v) {
        return conv2d(v[0], v[1], v[2], {2, 2}, {1, 1}, {1, 1}, 2);
      },
      {rnd({2, 4, 6, 6}, 25), rnd({6, 2, 3, 3}, 26), rnd({6}, 27)},
      /*expect_symbols=*/false);  // conv2d's rule pins channels (groups)
  check_vjp_traces("max_pool2d",
                   [](const V& v) {
                     return max_pool2d(v[0], {3, 3}, {2, 2}, {1, 1});
                   },
                   {rnd({2, 3, 7, 7}, 28)});
  check_vjp_traces("avg_pool2d",
                   [](const V& v) {
                     return avg_pool2d(v[0], {2, 2});
                   },
                   {rnd({2, 3, 6, 6}, 29)});
  check_vjp_traces("adaptive_avg_pool2d",
                   [](const V& v) {
                     return adaptive_avg_pool2d(v[0], {1, 1});
                   },
                   {rnd({2, 3, 5, 5}, 30)});
  check_vjp_traces("softmax", [](const V& v) { return softmax(v[0], -1); }, {rnd({3, 5}, 31)});
  check_vjp_traces("log_softmax", [](const V& v) { return log_softmax(v[0], 1); },
                   {rnd({3, 5}, 32)});
  check_vjp_traces(
      "layer_norm", [](const V& v) { return layer_norm(v[0], {4}, v[1], v[2]); },
      {rnd({2, 3, 4}, 33), rnd({4}, 34), rnd({4}, 35)},
      /*expect_symbols=*/false);  // normalized_shape is a constant
  check_vjp_traces("batch_norm_train",
                   [](const V& v) { return batch_norm(v[0], {}, {}, v[1], v[2], true, 0.1, 1e-5); },
                   {rnd({4, 3, 2, 2}, 36), rnd({3}, 37), rnd({3}, 38)});
  const Tensor idx = from_vector<int64_t>({1, 3, 1, 0}, {2, 2});
  check_vjp_traces(
      "embedding", [&](const V& v) { return embedding(v[0], idx); }, {rnd({5, 4}, 39)},
      /*expect_symbols=*/false);  // embedding_backward's row count
  const Tensor target = from_vector<int64_t>({2, 0, 4}, {3});
  check_vjp_traces(
      "nll_loss", [&](const V& v) { return nll_loss(v[0], target); }, {rnd({3, 5}, 40)},
      /*expect_symbols=*/false);  // the class count of the one-hot arange
}
