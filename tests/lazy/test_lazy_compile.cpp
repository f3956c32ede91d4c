// Trace once on the lazy device: lathe::compile on a module whose parameters live on the lazy
// device lifts them as graph inputs (the device buffers, no copy) and replays the executable
// on later calls without recording any IR.
#include <gtest/gtest.h>

#include "lathe/lazy/lazy.h"
#include "lathe/models/registry.h"
#include "lathe/nn/layers.h"
#include "lathe/ops/ops.h"
#include "lathe/trace/compile.h"
#include "lazy_test_util.h"
#include "tests/models/small_models.h"

using namespace lathe;
using namespace lathe::models;
using lathe::lazy_test::all_close;
using lathe::lazy_test::randn;
using lathe::lazy_test::small_inputs;
using lathe::lazy_test::to_device;

namespace {

class LazyCompileModel : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(LazyCompileModel, SecondCallRecordsNoIrAndEqualsEager) {
  const std::string name = GetParam();
  auto spec = test_models::small_model(name, 21, 64);
  spec->module->eval();
  std::vector<Tensor> in1 = small_inputs(name, 2, 22), in2 = small_inputs(name, 2, 23);
  std::vector<Tensor> eager1 = spec->forward(in1), eager2 = spec->forward(in2);

  spec->module->to(Device::lazy());
  CompiledFunction f = compile(spec->module);
  std::vector<Tensor> d1 = to_device(in1, Device::lazy()), d2 = to_device(in2, Device::lazy());
  std::vector<Tensor> out1 = f(d1);  // traces and compiles
  ASSERT_EQ(out1.size(), eager1.size());
  lazy::reset_metrics();
  std::vector<Tensor> out2 = f(d2);  // guards + executable only
  lazy::Metrics m = lazy::metrics();
  EXPECT_EQ(m.ops_traced, 0) << m.to_string();
  EXPECT_EQ(m.graphs_built, 0) << m.to_string();
  EXPECT_EQ(m.compiles, 0) << m.to_string();
  EXPECT_EQ(m.bytes_to_device, 0) << m.to_string();  // parameters are not copied per call
  EXPECT_EQ(f.stats().compiles, 1);
  EXPECT_EQ(f.stats().hits, 1);
  for (size_t i = 0; i < eager1.size(); ++i) {
    EXPECT_EQ(out2[i].device(), Device::lazy());
    EXPECT_TRUE(out2[i].has_storage());  // device data: nothing pending
    EXPECT_TRUE(all_close(out1[i].to(Device::cpu()), eager1[i], 1e-4, 1e-4)) << name << " " << i;
    EXPECT_TRUE(all_close(out2[i].to(Device::cpu()), eager2[i], 1e-4, 1e-4)) << name << " " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, LazyCompileModel, ::testing::ValuesIn(model_names()),
                         [](const auto& info) { return info.param; });

TEST(LazyCompile, ParametersAreLiftedByReferenceNotCopied) {
  auto lin = nn::make<nn::Linear>(8, 4);
  lin->to(Device::lazy());
  const void* w = lin->param("weight").raw_data();
  CompiledFunction f = compile(lin);
  Tensor x = randn({3, 8}, 1);
  lazy::reset_metrics();
  Tensor y = f({x.to(Device::lazy())})[0];
  EXPECT_EQ(lazy::metrics().bytes_to_device, static_cast<int64_t>(x.nbytes()));
  EXPECT_EQ(lin->param("weight").raw_data(), w);  // the same device buffer
  // A lazy update of the weight between calls is seen by the next call.
  mul_(lin->param("weight"), 2.0);
  Tensor y2 = f({x.to(Device::lazy())})[0];
  EXPECT_EQ(f.stats().compiles, 1);
  Tensor b = lin->param("bias").to(Device::cpu());
  Tensor expect = add(mul(sub(y.to(Device::cpu()), b), 2.0), b);
  EXPECT_TRUE(all_close(y2.to(Device::cpu()), expect, 1e-5, 1e-5));
}

TEST(LazyCompile, PendingArgumentsAreComputedFirst) {
  auto lin = nn::make<nn::Linear>(8, 4);
  Tensor x = randn({3, 8}, 2);
  Tensor expect = lin->forward(relu(x));
  lin->to(Device::lazy());
  CompiledFunction f = compile(lin);
  Tensor pending = relu(x.to(Device::lazy()));  // recorded, not run
  EXPECT_FALSE(pending.has_storage());
  Tensor y = f({pending})[0];
  EXPECT_TRUE(all_close(y.to(Device::cpu()), expect, 1e-5, 1e-5));
}

TEST(LazyCompile, TrainModeBatchNormUpdatesDeviceBuffers) {
  auto eager = test_models::small_model("resnet18", 31, 64);
  auto lz = test_models::small_model("resnet18", 31, 64);
  eager->module->train();
  lz->module->train();
  lz->module->to(Device::lazy());
  CompiledFunction f = compile(lz->module);
  for (uint64_t step = 0; step < 3; ++step) {
    std::vector<Tensor> in = small_inputs("resnet18", 2, 300 + step);
    Tensor e = eager->forward(in)[0];
    Tensor l = f(to_device(in, Device::lazy()))[0];
    EXPECT_TRUE(all_close(l.to(Device::cpu()), e, 1e-4, 1e-4)) << "step " << step;
  }
  EXPECT_EQ(f.stats().compiles, 1);
  auto eb = eager->module->named_buffers();
  auto lb = lz->module->named_buffers();
  ASSERT_EQ(eb.size(), lb.size());
  for (size_t i = 0; i < eb.size(); ++i) {
    EXPECT_EQ(lb[i].second.device(), Device::lazy()) << lb[i].first;
    EXPECT_TRUE(all_close(lb[i].second.to(Device::cpu()), eb[i].second, 1e-5, 1e-6)) << lb[i].first;
  }
}

TEST(LazyCompile, MixingDevicesIsAClearError) {
  auto lin = nn::make<nn::Linear>(8, 4);
  lin->to(Device::lazy());
  CompiledFunction f = compile(lin);
  try {
    f({randn({3, 8}, 3)});  // a CPU input for a module on the lazy device
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("different devices"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cpu"), std::string::npos) << msg;
    EXPECT_NE(msg.find("lazy"), std::string::npos) << msg;
  }
}

TEST(LazyCompile, MovingTheModuleRecompiles) {
  auto lin = nn::make<nn::Linear>(8, 4);
  Tensor x = randn({3, 8}, 4);
  CompiledFunction f = compile(lin);
  Tensor cpu_out = f({x})[0];
  lin->to(Device::lazy());
  Tensor lazy_out = f({x.to(Device::lazy())})[0];
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_NE(f.last_recompile_reason().find("device"), std::string::npos)
      << f.last_recompile_reason();
  EXPECT_EQ(lazy_out.device(), Device::lazy());
  EXPECT_TRUE(all_close(lazy_out.to(Device::cpu()), cpu_out, 1e-6, 1e-6));
}

// An inference module on the lazy device freezes its parameters as their device buffers (the
// cpu backend folds them); a lazy in-place update of a parameter (pending until sync) fails the
// frozen guard, and the next call re-freezes the new values.
TEST(LazyCompile, FrozenDeviceParametersRefreezeAfterALazyUpdate) {
  auto lin = nn::make<nn::Linear>(8, 4);
  lin->eval();
  lin->to(Device::lazy());
  CompiledFunction f = compile(lin);
  Tensor x = randn({3, 8}, 4);
  Tensor y = f({x.to(Device::lazy())})[0];
  EXPECT_NE(f.guards_string().find("frozen"), std::string::npos) << f.guards_string();
  Tensor w = lin->param("weight").to(Device::cpu()), b = lin->param("bias").to(Device::cpu());
  EXPECT_TRUE(all_close(y.to(Device::cpu()), add(matmul(x, w.transpose(0, 1)), b), 1e-5, 1e-5));
  for (int step = 1; step <= 3; ++step) {
    mul_(lin->param("weight"), 2.0);  // recorded on the device, pending
    Tensor y2 = f({x.to(Device::lazy())})[0];
    Tensor w2 = lin->param("weight").to(Device::cpu());
    EXPECT_TRUE(all_close(w2, mul(w, static_cast<double>(1 << step)), 1e-6, 1e-6));
    EXPECT_TRUE(all_close(y2.to(Device::cpu()), add(matmul(x, w2.transpose(0, 1)), b), 1e-5, 1e-5))
        << "after update " << step;
  }
  EXPECT_EQ(f.stats().compiles, 4);  // each update re-freezes
  EXPECT_EQ(f.num_entries(), 1u);    // and drops the stale entry
}

// A fused pointwise chain (the cpu backend's fuse_pointwise) whose first input is a 0-d CPU
// scalar (what `1.0 - x` records) and whose other inputs are on the lazy device, as bert's
// attention mask is: the fused node is on the lazy device, like the ops it replaces.
TEST(LazyCompile, FusedPointwiseChainWithACpuScalarStaysOnTheDevice) {
  CompiledFunction f = compile(
      [](const std::vector<Tensor>& a) { return std::vector<Tensor>{mul(rsub(a[0], 1.0), -3.0)}; });
  Tensor x = randn({2, 5}, 6);
  Tensor y = f({x.to(Device::lazy())})[0];
  EXPECT_EQ(y.device(), Device::lazy());
  EXPECT_TRUE(all_close(y.to(Device::cpu()), mul(rsub(x, 1.0), -3.0), 1e-6, 1e-6));
}
