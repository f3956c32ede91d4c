// Post-accumulate-grad hooks and end-of-backward callbacks (what DistributedDataParallel builds
// on): a hook fires once per backward, after every contribution to the leaf's .grad, while the
// backward may still have nodes to run; a queued callback runs after the last node.
#include <gtest/gtest.h>

#include <vector>

#include "lathe/ops/autograd.h"
#include "lathe/ops/ops.h"
#include "lathe/trace/compile.h"

namespace lathe {
namespace {

TEST(GradHooks, FireOnceAfterEveryContributionOfTheBackward) {
  Tensor w = from_vector<float>({2.0f}, {1});
  w.set_requires_grad(true);
  std::vector<double> seen;
  autograd::register_post_accumulate_grad_hook(
      w, [&](const Tensor& t) { seen.push_back(t.grad().item()); });
  // w is used twice: d(w*3 + w*w)/dw = 3 + 2w = 7; the hook sees the complete gradient once.
  Tensor y = add(mul(w, 3.0), mul(w, w));
  sum(y).backward();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_DOUBLE_EQ(seen[0], 7.0);
  // A second backward accumulates (7 + 7) and fires again.
  sum(add(mul(w, 3.0), mul(w, w))).backward();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_DOUBLE_EQ(seen[1], 14.0);
}

TEST(GradHooks, AnEarlyLeafFiresBeforeTheBackwardEnds) {
  // The last layer's weight is complete after one node; the first layer's after the last.
  Tensor a = from_vector<float>({1.0f, 2.0f}, {2}), b = from_vector<float>({3.0f, 4.0f}, {2});
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  int64_t nodes_when_b = -1, nodes_when_a = -1, nodes_at_end = -1;
  autograd::register_post_accumulate_grad_hook(b, [&](const Tensor&) {
    nodes_when_b = autograd::nodes_run_in_backward();
    autograd::queue_callback([&] { nodes_at_end = autograd::nodes_run_in_backward(); });
  });
  autograd::register_post_accumulate_grad_hook(
      a, [&](const Tensor&) { nodes_when_a = autograd::nodes_run_in_backward(); });
  Tensor h = tanh(mul(a, 2.0));  // a -> mul -> tanh
  Tensor y = sum(mul(h, b));     // b enters at the last op before sum
  y.backward();
  EXPECT_GT(nodes_when_b, 0);
  EXPECT_LT(nodes_when_b, nodes_at_end) << "b's hook fired before the rest of the backward ran";
  EXPECT_EQ(nodes_when_a, nodes_at_end) << "a's gradient is complete only at the last node";
  EXPECT_FALSE(autograd::in_backward());
}

TEST(GradHooks, RemovedHooksDoNotFireAndMisuseIsAnError) {
  Tensor w = from_vector<float>({1.0f}, {1});
  w.set_requires_grad(true);
  int calls = 0;
  const int64_t id =
      autograd::register_post_accumulate_grad_hook(w, [&](const Tensor&) { ++calls; });
  autograd::remove_post_accumulate_grad_hook(w, id);
  sum(mul(w, 2.0)).backward();
  EXPECT_EQ(calls, 0);
  EXPECT_THROW(autograd::queue_callback([] {}), Error);
  Tensor nonleaf = mul(w, 2.0);
  EXPECT_THROW(autograd::register_post_accumulate_grad_hook(nonleaf, [](const Tensor&) {}), Error);
}

TEST(GradHooks, FireAfterACompiledBackward) {
  Tensor w = from_vector<float>({0.5f, -1.0f, 2.0f}, {3});
  w.set_requires_grad(true);
  std::vector<std::vector<float>> seen;
  autograd::register_post_accumulate_grad_hook(
      w, [&](const Tensor& t) { seen.push_back(t.grad().to_vector<float>()); });
  CompiledFunction f = compile([w](const std::vector<Tensor>& a) { return sum(mul(a[0], w)); });
  const Tensor x = from_vector<float>({1.0f, 2.0f, 3.0f}, {3});
  f({x})[0].backward();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], (std::vector<float>{1.0f, 2.0f, 3.0f}));
}

}  // namespace
}  // namespace lathe
