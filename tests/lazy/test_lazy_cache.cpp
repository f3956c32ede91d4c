// The executable cache: hits on repeated graphs (found by the hash recording computes, with no
// graph built), a new compile per new shape, and hash collisions that never mix graphs up.
#include <gtest/gtest.h>

#include "lathe/ir/graph.h"
#include "lathe/lazy/freezing.h"
#include "lathe/lazy/lazy.h"
#include "lathe/core/grad_mode.h"
#include "lathe/models/registry.h"
#include "lathe/ops/ops.h"
#include "lazy_test_util.h"

using namespace lathe;
using lathe::lazy_test::all_close;
using lathe::lazy_test::randn;

namespace {

std::shared_ptr<models::ModelSpec> small_resnet18() {
  models::ModelOptions o;
  o.seed = 21;
  o.num_classes = 10;
  return models::create_model("resnet18", o);
}

Tensor image(int64_t batch, uint64_t seed) {
  models::InputOptions io;
  io.image_size = 32;
  return models::default_inputs("resnet18", batch, seed, io)[0];
}

}  // namespace

TEST(LazyCache, SecondIterationTracesButDoesNotCompile) {
  auto spec = small_resnet18();
  spec->module->eval();
  spec->module->to(Device::lazy());
  lazy::clear_cache();
  lazy::reset_metrics();
  Tensor out1 = spec->forward({image(2, 1).to(Device::lazy())})[0].to(Device::cpu());
  lazy::Metrics m1 = lazy::metrics();
  EXPECT_GT(m1.ops_traced, 20);
  EXPECT_EQ(m1.graphs_built, 1);
  EXPECT_EQ(m1.graph_hashes, 1);
  EXPECT_EQ(m1.cache_misses, 1);
  EXPECT_EQ(m1.cache_hits, 0);
  EXPECT_EQ(m1.compiles, 1);
  EXPECT_EQ(m1.executions, 1);

  // The second call hits, with the module's state unchanged: the entry's frozen variant (the
  // parameters and buffers as constants, lathe/lazy/freezing.h) is built and compiled once.
  Tensor out2 = spec->forward({image(2, 2).to(Device::lazy())})[0].to(Device::cpu());
  lazy::Metrics m2 = lazy::metrics();
  EXPECT_EQ(m2.ops_traced, 2 * m1.ops_traced);  // traced again, every op
  EXPECT_EQ(m2.graph_hashes, 2);
  EXPECT_EQ(m2.cache_hits, 1);
  EXPECT_EQ(m2.cache_misses, 1);
  EXPECT_EQ(m2.freezes, 1);
  EXPECT_EQ(m2.graphs_built, 2);
  EXPECT_EQ(m2.compiles, 2);
  EXPECT_EQ(m2.executions, 2);
  EXPECT_EQ(lazy::cache_size(), 1u);
  EXPECT_FALSE(all_close(out1, out2));  // different inputs, different results

  // From the third call on, neither a graph nor a compile: the hash finds the entry.
  Tensor out3 = spec->forward({image(2, 1).to(Device::lazy())})[0].to(Device::cpu());
  lazy::Metrics m3 = lazy::metrics();
  EXPECT_EQ(m3.ops_traced, 3 * m1.ops_traced);
  EXPECT_EQ(m3.graphs_built, 2);  // a hit is found by the hash recording computed: no graph
  EXPECT_EQ(m3.compiles, 2);      // not compiled again
  EXPECT_EQ(m3.cache_hits, 2);
  EXPECT_TRUE(all_close(out3, out1, 1e-4, 1e-4));  // folded batch norm: rounding differs

  // A new batch size is a new graph: compiled once, frozen at its second call, then hit.
  spec->forward({image(3, 3).to(Device::lazy())})[0].to(Device::cpu());
  spec->forward({image(3, 4).to(Device::lazy())})[0].to(Device::cpu());
  spec->forward({image(3, 5).to(Device::lazy())})[0].to(Device::cpu());
  lazy::Metrics m4 = lazy::metrics();
  EXPECT_EQ(m4.compiles, 4);
  EXPECT_EQ(m4.freezes, 2);
  EXPECT_EQ(m4.cache_misses, 2);
  EXPECT_EQ(m4.cache_hits, 4);
  EXPECT_EQ(m4.hash_collisions, 0);
  EXPECT_EQ(lazy::cache_size(), 2u);
  EXPECT_GT(m4.trace_s, 0);
  EXPECT_GT(m4.compile_s, 0);
  EXPECT_GT(m4.execute_s, 0);
  EXPECT_NE(m4.to_string().find("compiles: 4"), std::string::npos) << m4.to_string();
}

TEST(LazyCache, FrozenVariantFollowsTheModuleState) {
  // Frozen parameters are guarded by their storage and version: an in-place update drops the
  // frozen variant (the result follows the update at once), a repeated state freezes again, and
  // an entry whose state keeps changing stops freezing.
  auto spec = small_resnet18(), ref = small_resnet18();
  spec->module->eval();
  ref->module->eval();
  spec->module->to(Device::lazy());
  lazy::clear_cache();
  lazy::reset_metrics();
  Tensor x = image(2, 7);
  Tensor lx = x.to(Device::lazy());
  auto check = [&](const char* when) {
    Tensor got = spec->forward({lx})[0].to(Device::cpu());
    EXPECT_TRUE(all_close(got, ref->forward({x})[0], 1e-4, 1e-4)) << when;
  };
  check("first call");
  check("second call (freezes)");
  check("third call (frozen)");
  EXPECT_EQ(lazy::metrics().freezes, 1);
  Tensor w = spec->module->named_parameters().front().second;
  Tensor rw = ref->module->named_parameters().front().second;
  for (int round = 0; round < 3; ++round) {
    {
      NoGradGuard no_grad;
      mul_(w, 0.5);
      mul_(rw, 0.5);
    }
    lathe::sync();  // the update runs in a window of its own (a graph that writes: no freezing)
    check("after an in-place update");
    check("the same state again");
  }
  lazy::Metrics m = lazy::metrics();
  EXPECT_EQ(m.freezes_dropped, lazy::kMaxFreezeDrops);
  EXPECT_EQ(m.freezes, lazy::kMaxFreezeDrops);  // refrozen after the first drop only
}

TEST(LazyCache, HashCollisionsAreHarmless) {
  lazy::clear_cache();
  lazy::reset_metrics();
  lazy::testing::set_hash_override([](uint64_t) { return uint64_t{42}; });
  Tensor a = randn({3, 4}, 31), b = randn({3, 4}, 32);
  Tensor la = a.to(Device::lazy()), lb = b.to(Device::lazy());
  // Same inputs, same shapes, different ops: one bucket, two graphs.
  Tensor sum_ab = add(la, lb).to(Device::cpu());
  Tensor prod_ab = mul(la, lb).to(Device::cpu());
  Tensor sum_again = add(lb, la).to(Device::cpu());
  Tensor prod_again = mul(lb, la).to(Device::cpu());
  lazy::testing::set_hash_override(nullptr);
  EXPECT_TRUE(all_close(sum_ab, add(a, b), 0, 0));
  EXPECT_TRUE(all_close(prod_ab, mul(a, b), 0, 0));
  EXPECT_TRUE(all_close(sum_again, add(b, a), 0, 0));
  EXPECT_TRUE(all_close(prod_again, mul(b, a), 0, 0));
  lazy::Metrics m = lazy::metrics();
  EXPECT_EQ(m.compiles, 2);
  EXPECT_EQ(m.cache_hits, 2);
  EXPECT_EQ(m.hash_collisions, 1);  // the mul graph found the add graph in its bucket
  EXPECT_EQ(lazy::cache_size(), 2u);
}

TEST(LazyCache, GraphsDifferingInAnAttributeOrShapeNeverShareAnEntry) {
  // Graphs that differ only in an attribute or a shape never share an executable, even in one
  // bucket; graphs that differ only in data do.
  lazy::clear_cache();
  lazy::testing::set_hash_override([](uint64_t) { return uint64_t{7}; });
  Tensor a = randn({2, 6}, 33);
  Tensor la = a.to(Device::lazy());
  Tensor s0 = sum(la, {0}).to(Device::cpu());
  Tensor s1 = sum(la, {1}).to(Device::cpu());
  Tensor m3 = mul(la, 3.0).to(Device::cpu());
  Tensor m5 = mul(la, 5.0).to(Device::cpu());
  Tensor small = mul(randn({2, 3}, 34).to(Device::lazy()), 3.0).to(Device::cpu());
  lazy::testing::set_hash_override(nullptr);
  EXPECT_TRUE(all_close(s0, sum(a, {0})));
  EXPECT_TRUE(all_close(s1, sum(a, {1})));
  EXPECT_TRUE(all_close(m3, mul(a, 3.0), 0, 0));
  EXPECT_TRUE(all_close(m5, mul(a, 5.0), 0, 0));
  EXPECT_TRUE(all_close(small, mul(randn({2, 3}, 34), 3.0), 0, 0));
  // sum over dim 0 / dim 1, mul by a scalar, and the smaller mul: four graphs. The scalar of
  // mul is a 0-dim operand, so it is device data (a graph input), not part of the structure:
  // mul by 3 and by 5 share one executable and still give their own results.
  EXPECT_EQ(lazy::cache_size(), 4u);
}

TEST(LazyCache, BackendIsConfigurable) {
  EXPECT_EQ(lazy::backend(), "cpu");  // the default: the optimizing backend
  EXPECT_THROW(lazy::set_backend("no-such-backend"), Error);
  EXPECT_EQ(lazy::backend(), "cpu");
  // The reference stays selectable; switching clears the cache and runs graphs on it.
  Tensor x = randn({2, 3}, 42);
  Tensor want = relu(mul(x, 2.0));
  lazy::set_backend("interpreter");
  EXPECT_EQ(lazy::backend(), "interpreter");
  EXPECT_EQ(lazy::cache_size(), 0u);
  Tensor got = relu(mul(x.to(Device::lazy()), 2.0)).to(Device::cpu());
  EXPECT_TRUE(all_close(got, want, 0, 0));
  lazy::set_backend("cpu");
  EXPECT_EQ(lazy::cache_size(), 0u);
}

TEST(LazyCache, SameOpsWithOtherLiveResultsAreAnotherEntry) {
  // The key covers which recorded results are alive at the sync, not only the ops recorded:
  // the same two ops with both results alive, then with only the last, are two executables,
  // each giving its own outputs; repeating either hits.
  lazy::clear_cache();
  lazy::reset_metrics();
  Tensor x = randn({2, 3}, 41);
  Tensor lx = x.to(Device::lazy());
  for (int round = 0; round < 2; ++round) {
    Tensor a = relu(lx);
    Tensor b = neg(a);
    lathe::sync();
    EXPECT_TRUE(all_close(a, relu(x), 0, 0));
    EXPECT_TRUE(all_close(b, neg(relu(x)), 0, 0));
    Tensor only_b = neg(relu(lx));
    lathe::sync();
    EXPECT_TRUE(all_close(only_b, neg(relu(x)), 0, 0));
  }
  lazy::Metrics m = lazy::metrics();
  EXPECT_EQ(lazy::cache_size(), 2u);
  EXPECT_EQ(m.cache_misses, 2);
  EXPECT_EQ(m.cache_hits, 2);
  EXPECT_EQ(m.graphs_built, 2);  // hits build none
}
