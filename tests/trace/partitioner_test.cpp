// The partition stage is a seam: CompileOptions::partitioner plugs in another Partitioner, which
// is asked to split the joint graph of each training entry (and not of inference entries).
#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include "lathe/core/grad_mode.h"
#include "lathe/ops/ops.h"
#include "lathe/trace/compile.h"
#include "lathe/trace/partition.h"
#include "test_util.h"

using namespace lathe;
using lathe::test::contains;
using lathe::test::randn_seeded;
using lathe::test::same_values;

namespace {

// Records that it was asked, then lets the default rule decide.
class RecordingPartitioner : public Partitioner {
 public:
  std::string name() const override { return "recording"; }
  detail::Partition partition(detail::JointGraph& joint) const override {
    calls.fetch_add(1);
    last_needed = joint.needed.size();
    // The joint's backward half maps each input that reads the forward to its value.
    EXPECT_NE(joint.backward, nullptr);
    EXPECT_EQ(joint.forward_value_of.size(), joint.needed.size());
    return DefaultPartitioner().partition(joint);
  }
  mutable std::atomic<int> calls{0};
  mutable size_t last_needed = 0;
};

// Saves every value the backward reads (no recomputation).
class SaveAllPartitioner : public Partitioner {
 public:
  std::string name() const override { return "save_all"; }
  detail::Partition partition(detail::JointGraph& joint) const override {
    std::vector<ir::Value*> saved;
    for (const ir::Value* v : joint.needed)
      if (!v->is_input()) saved.push_back(const_cast<ir::Value*>(v));
    return joint.split(std::move(saved), {});
  }
};

// mul's vjp reads a = w + 1, which the default rule recomputes from w; tanh's result is saved.
Tensor loss(const Tensor& x, const Tensor& w) {
  Tensor a = add(w, 1.0);
  return add(sum(mul(a, a)), sum(tanh(matmul(x, w))));
}

// The gradient of w through `f` (compiled or not).
Tensor grad_through(const std::function<Tensor(const Tensor&, const Tensor&)>& f, const Tensor& x,
                    const Tensor& w0) {
  Tensor w = w0.clone();
  w.set_requires_grad(true);
  f(x, w).backward();
  return w.grad();
}

}  // namespace

TEST(Partitioner, ACustomPartitionerIsUsedForTrainingEntries) {
  auto p = std::make_shared<RecordingPartitioner>();
  CompileOptions o;
  o.partitioner = p;
  auto f = compile([](const std::vector<Tensor>& a) { return loss(a[0], a[1]); }, o);
  const Tensor x = randn_seeded({4, 3}, 1), w = randn_seeded({3, 5}, 2);
  Tensor got = grad_through([&](const Tensor& a, const Tensor& b) { return f({a, b})[0]; }, x, w);
  EXPECT_EQ(p->calls.load(), 1);
  EXPECT_GT(p->last_needed, 0u);
  EXPECT_TRUE(same_values(got, grad_through(loss, x, w), 1e-5));
  // A hit does not partition again; an inference call builds no joint graph.
  grad_through([&](const Tensor& a, const Tensor& b) { return f({a, b})[0]; }, x, w);
  EXPECT_EQ(p->calls.load(), 1);
  NoGradGuard no_grad;
  f({x, w});
  EXPECT_EQ(p->calls.load(), 1);
  EXPECT_EQ(f.num_entries(), 2u);
}

TEST(Partitioner, TheChoiceReachesTheCompiledGraphs) {
  const Tensor x = randn_seeded({4, 3}, 3), w = randn_seeded({3, 5}, 4);
  CompileOptions o;
  o.partitioner = std::make_shared<SaveAllPartitioner>();
  auto save_all = compile([](const std::vector<Tensor>& a) { return loss(a[0], a[1]); }, o);
  auto by_default =
      compile([](const std::vector<Tensor>& a) { return loss(a[0], a[1]); }, CompileOptions{});
  Tensor g1 = grad_through(
      [&](const Tensor& a, const Tensor& b) {
        return save_all({a, b})[0];
      },
      x, w);
  Tensor g2 = grad_through(
      [&](const Tensor& a, const Tensor& b) {
        return by_default({a, b})[0];
      },
      x, w);
  EXPECT_TRUE(same_values(g1, grad_through(loss, x, w), 1e-5));
  EXPECT_TRUE(same_values(g2, g1, 1e-6));
  // The default recomputes w + 1 from w; saving everything recomputes nothing.
  EXPECT_TRUE(contains(save_all.graph_string(), " 0 recomputed")) << save_all.graph_string();
  EXPECT_FALSE(contains(by_default.graph_string(), " 0 recomputed")) << by_default.graph_string();
}

TEST(Partitioner, NamedInTheOptions) {
  CompileOptions o;
  EXPECT_TRUE(contains(o.to_string(), "partitioner=default"));
  o.partitioner = std::make_shared<SaveAllPartitioner>();
  EXPECT_TRUE(contains(o.to_string(), "partitioner=save_all"));
  EXPECT_EQ(&partitioner_of(o), o.partitioner.get());
  EXPECT_EQ(partitioner_of(CompileOptions{}).name(), "default");
}
