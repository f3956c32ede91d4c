// The lazy device: transfers, recording, sync on read, in-place updates, device errors, modules.
#include <gtest/gtest.h>

#include "lathe/lazy/lazy.h"
#include "lathe/nn/init.h"
#include "lathe/nn/layers.h"
#include "lathe/ops/backward_ops.h"
#include "lathe/ops/ops.h"
#include "lazy_test_util.h"

using namespace lathe;
using lathe::lazy_test::all_close;
using lathe::lazy_test::randn;

namespace {

bool has_data(const Tensor& t) { return t.has_storage(); }

}  // namespace

TEST(LazyDevice, ToLazyAndBackCopiesAndCountsBytes) {
  Tensor x = randn({3, 4}, 1);
  lazy::reset_metrics();
  Tensor l = x.to(Device::lazy());
  EXPECT_EQ(l.device(), Device::lazy());
  EXPECT_EQ(l.shape(), x.shape());
  x.fill_(7.0);  // the device copy is independent of the CPU tensor
  Tensor back = l.to(Device::cpu());
  EXPECT_EQ(back.device(), Device::cpu());
  EXPECT_TRUE(all_close(back, randn({3, 4}, 1), 0, 0));
  lazy::Metrics m = lazy::metrics();
  EXPECT_EQ(m.bytes_to_device, 48);
  EXPECT_EQ(m.bytes_from_device, 48);
  EXPECT_EQ(m.transfers_to_device, 1);
  EXPECT_EQ(m.transfers_from_device, 1);
}

TEST(LazyDevice, OpsRecordUntilSyncAndEqualEager) {
  Tensor a = randn({4, 5}, 2), b = randn({5}, 3), w = randn({6, 5}, 4);
  Tensor eager = relu(linear(add(a, b), w));
  Tensor la = a.to(Device::lazy()), lb = b.to(Device::lazy()), lw = w.to(Device::lazy());
  lazy::reset_metrics();
  Tensor lazy_out = relu(linear(add(la, lb), lw));
  EXPECT_EQ(lazy_out.device(), Device::lazy());
  EXPECT_EQ(lazy_out.shape(), (std::vector<int64_t>{4, 6}));
  EXPECT_FALSE(has_data(lazy_out));  // recorded, not run
  lazy::Metrics m = lazy::metrics();
  EXPECT_EQ(m.ops_traced, 3);
  EXPECT_EQ(m.syncs, 0);
  EXPECT_EQ(m.executions, 0);
  lathe::sync();
  EXPECT_TRUE(has_data(lazy_out));
  m = lazy::metrics();
  EXPECT_EQ(m.syncs, 1);
  EXPECT_EQ(m.graphs_built, 1);
  EXPECT_EQ(m.graph_nodes, 3);
  EXPECT_EQ(m.executions, 1);
  EXPECT_TRUE(all_close(lazy_out.to(Device::cpu()), eager));
  lathe::sync();  // nothing pending: no new graph
  EXPECT_EQ(lazy::metrics().graphs_built, 1);
}

TEST(LazyDevice, ReadingDataSyncs) {
  Tensor a = randn({2, 3}, 5);
  Tensor la = a.to(Device::lazy());
  lazy::reset_metrics();
  Tensor s = sum(mul(la, la));
  EXPECT_EQ(lazy::metrics().syncs, 0);
  EXPECT_NEAR(s.item(), sum(mul(a, a)).item(), 1e-5);  // item() syncs
  EXPECT_EQ(lazy::metrics().syncs, 1);
  Tensor r = relu(la);
  std::vector<float> v = r.to_vector<float>();  // to_vector syncs
  EXPECT_EQ(v, relu(a).to_vector<float>());
  Tensor n = neg(la);
  ASSERT_NE(n.raw_data(), nullptr);  // raw_data syncs
  EXPECT_EQ(static_cast<float*>(n.raw_data())[4], -a.to_vector<float>()[4]);
  EXPECT_EQ(lazy::metrics().syncs, 3);
}

TEST(LazyDevice, DeadPendingValuesAreNotComputed) {
  Tensor la = randn({8, 8}, 6).to(Device::lazy());
  lazy::reset_metrics();
  Tensor kept = relu(la);
  {
    Tensor dropped = matmul(la, la);
    Tensor dropped2 = exp(dropped);
  }
  lathe::sync();
  lazy::Metrics m = lazy::metrics();
  EXPECT_EQ(m.ops_traced, 3);
  EXPECT_EQ(m.graph_nodes, 1);  // only relu
  EXPECT_TRUE(has_data(kept));
}

TEST(LazyDevice, AnyOutputKeepsItsNodeAndInputsAlive) {
  // Output 0's value lives inside its node and the other outputs hold the node: whichever output
  // is kept, alone, after its siblings and its inputs' tensors are dropped, computes what eager
  // does, on a cache miss (graph built from the node's output types) and on a hit.
  Tensor go = randn({2, 3, 4, 4}, 21), x = randn({2, 3, 4, 4}, 22), w = randn({3}, 23);
  const std::vector<Tensor> eager = batch_norm_backward(go, exp(x), w, 1e-5);
  for (int keep = 0; keep < 3; ++keep) {
    for (int call = 0; call < 2; ++call) {
      Tensor kept;
      {
        Tensor lx = exp(x.to(Device::lazy()));
        std::vector<Tensor> outs =
            batch_norm_backward(go.to(Device::lazy()), lx, w.to(Device::lazy()), 1e-5);
        ASSERT_EQ(outs.size(), 3u);
        kept = outs[keep];
      }
      EXPECT_FALSE(has_data(kept));
      EXPECT_TRUE(all_close(kept.to(Device::cpu()), eager[keep])) << "output " << keep;
    }
  }
}

TEST(LazyDevice, ManyInputsAndHighRankOutputsOnAMissAndAHit) {
  // A node keeps up to five inputs and five dims of output 0's sizes inline, more on the heap:
  // an op with seven inputs and a 6-d output records, builds its graph (miss) and replays (hit).
  std::vector<Tensor> parts;
  for (int i = 0; i < 7; ++i) parts.push_back(randn({2, 1, 3, 1, 2, 2}, 40 + i));
  Tensor eager = relu(cat(parts, 1));
  lazy::reset_metrics();
  for (int call = 0; call < 2; ++call) {
    std::vector<Tensor> lparts;
    for (const Tensor& p : parts) lparts.push_back(p.to(Device::lazy()));
    Tensor out = relu(cat(lparts, 1));
    EXPECT_FALSE(has_data(out));
    EXPECT_EQ(out.shape(), (std::vector<int64_t>{2, 7, 3, 1, 2, 2}));
    EXPECT_TRUE(all_close(out.to(Device::cpu()), eager)) << "call " << call;
  }
  lazy::Metrics m = lazy::metrics();
  EXPECT_EQ(m.ops_traced, 4);
  EXPECT_EQ(m.graphs_built, 1);
  EXPECT_EQ(m.graph_nodes, 2);
  EXPECT_EQ(m.cache_hits, 1);
}

TEST(LazyDevice, MixingDevicesIsAClearError) {
  Tensor cpu = randn({2, 3}, 7);
  Tensor lz = randn({2, 3}, 8).to(Device::lazy());
  try {
    add(cpu, lz);
    FAIL() << "mixing devices must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[add] inputs are on different devices: cpu and lazy"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(matmul(lz, cpu.t()), Error);
  // A 0-dim CPU tensor may join lazy tensors (PyTorch's CPU-scalar rule).
  Tensor scalar = full({}, 2.0);
  EXPECT_TRUE(all_close(mul(lz, scalar).to(Device::cpu()), mul(randn({2, 3}, 8), scalar)));
}

TEST(LazyDevice, InPlaceUpdatesLandInTheDeviceData) {
  Tensor a = randn({5}, 9), b = randn({5}, 10);
  Tensor la = a.to(Device::lazy()), lb = b.to(Device::lazy());
  Tensor alias = la;             // another handle to the same tensor
  Tensor before = mul(la, 2.0);  // reads the old value
  Tensor& r = add_(la, lb);
  EXPECT_TRUE(r.is_same(la));
  EXPECT_FALSE(has_data(la));   // pending until sync
  Tensor after = mul(la, 2.0);  // reads the new value
  lathe::sync();
  Tensor expect = add(a, b);
  EXPECT_TRUE(all_close(alias.to(Device::cpu()), expect, 0, 0));
  EXPECT_TRUE(all_close(before.to(Device::cpu()), mul(a, 2.0), 0, 0));
  EXPECT_TRUE(all_close(after.to(Device::cpu()), mul(expect, 2.0), 0, 0));
  // A write whose result nobody keeps still happens.
  add_(la, lb);
  EXPECT_TRUE(all_close(la.to(Device::cpu()), add(expect, b), 0, 0));
}

TEST(LazyDevice, ViewOfAKernelLaidOutResultIsRight) {
  // conv2d lays its result out channels-last; a pending tensor shows that layout (eager's), so
  // flatten (a reshape) copies as in eager and an explicit view fails as in eager.
  Tensor x = randn({2, 3, 6, 6}, 11), w = randn({4, 3, 3, 3}, 12);
  Tensor ec = conv2d(x, w);
  Tensor eager = ec.flatten(1);
  Tensor lc = conv2d(x.to(Device::lazy()), w.to(Device::lazy()));
  EXPECT_EQ(lc.int_strides(), ec.int_strides());
  Tensor lz = lc.flatten(1);
  EXPECT_EQ(lz.int_strides(), eager.int_strides());
  EXPECT_TRUE(all_close(lz.to(Device::cpu()), eager));
  EXPECT_THROW(ec.view({2, 4 * 16}), Error);
  EXPECT_THROW(lc.view({2, 4 * 16}), Error);
}

TEST(LazyDevice, ModuleToMovesParametersInPlace) {
  auto m = nn::make<nn::BatchNorm2d>(3);
  Tensor w = m->param("weight");  // a handle held outside the module
  Tensor rm = m->buffer("running_mean");
  uint64_t version = m->structure_version();
  m->to(Device::lazy());
  EXPECT_EQ(w.device(), Device::lazy());
  EXPECT_EQ(rm.device(), Device::lazy());
  EXPECT_TRUE(m->param("weight").is_same(w));
  EXPECT_GT(m->structure_version(), version);
  for (auto& [name, t] : m->named_buffers()) EXPECT_EQ(t.device(), Device::lazy()) << name;
  m->to(Device::cpu());
  EXPECT_EQ(w.device(), Device::cpu());
  EXPECT_EQ(w.to_vector<float>(), std::vector<float>(3, 1.f));
}

TEST(LazyDevice, ErrorsInTheGraphNameTheNode) {
  // A shape error is caught while recording, like eager.
  Tensor a = randn({2, 3}, 13).to(Device::lazy());
  Tensor b = randn({4, 5}, 14).to(Device::lazy());
  EXPECT_THROW(add(a, b), Error);
  EXPECT_THROW(matmul(a, b), Error);
}

TEST(LazyDevice, WritesThroughAViewReachTheBase) {
  Tensor a = randn({3, 4}, 15);
  Tensor la = a.to(Device::lazy());
  Tensor row = la.select(0, 1);
  row.fill_(2.5);  // writes into la's buffer through the view
  Tensor expect = a.clone();
  expect.select(0, 1).fill_(2.5);
  // Reading la syncs all pending work, including the write through the view.
  EXPECT_EQ(la.to_vector<float>(), expect.to_vector<float>());
  // Copying a pending value into device data.
  Tensor lb = randn({3, 4}, 16).to(Device::lazy());
  lb.copy_(relu(la));
  EXPECT_TRUE(all_close(lb.to(Device::cpu()), relu(expect), 0, 0));
}

TEST(LazyDevice, LoadStateDictIntoALazyModule) {
  auto m = nn::make<nn::Linear>(4, 3);
  auto src = nn::make<nn::Linear>(4, 3);
  nn::init::normal_(src->param("weight"), 0.0, 1.0);
  m->to(Device::lazy());
  m->load_state_dict(src->state_dict());  // copy_ into lazy parameters: recorded, then synced
  Tensor x = randn({2, 4}, 17);
  EXPECT_TRUE(all_close(m->forward(x.to(Device::lazy())).to(Device::cpu()), src->forward(x)));
  EXPECT_EQ(m->param("weight").device(), Device::lazy());
}

TEST(LazyDevice, WritingIntoACpuScalarFromALazyOpIsAnError) {
  Tensor cpu_scalar = full({}, 1.0);
  Tensor lz = full({}, 2.0).to(Device::lazy());
  EXPECT_THROW(add_(cpu_scalar, lz), Error);
  EXPECT_EQ(cpu_scalar.item(), 1.0);    // untouched
  EXPECT_EQ(add(lz, 1.0).item(), 3.0);  // the lazy device still works
}
