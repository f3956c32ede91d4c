// The model zoo on the lazy device: results equal eager (eval, batch 2, small inputs),
// train-mode BatchNorm state equals eager, and parameters stay on the device.
#include <gtest/gtest.h>

#include "lathe/lazy/lazy.h"
#include "lathe/models/registry.h"
#include "lathe/ops/ops.h"
#include "lazy_test_util.h"
#include "tests/models/small_models.h"

using namespace lathe;
using namespace lathe::models;
using lathe::lazy_test::all_close;
using lathe::lazy_test::small_inputs;
using lathe::lazy_test::to_device;

namespace {

std::shared_ptr<ModelSpec> small_model(const std::string& name, uint64_t seed) {
  return test_models::small_model(name, seed, 64);
}

class LazyModel : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(LazyModel, EvalEqualsEager) {
  const std::string name = GetParam();
  auto spec = small_model(name, 5);
  spec->module->eval();
  std::vector<Tensor> inputs = small_inputs(name, 2, 6);
  std::vector<Tensor> eager = spec->forward(inputs);
  spec->module->to(Device::lazy());
  lazy::reset_metrics();
  std::vector<Tensor> lazy_out = spec->forward(to_device(inputs, Device::lazy()));
  ASSERT_EQ(lazy_out.size(), eager.size());
  for (const Tensor& t : lazy_out) EXPECT_EQ(t.device(), Device::lazy());
  EXPECT_EQ(lazy::metrics().executions, 0);  // nothing ran before the outputs are read
  for (size_t i = 0; i < eager.size(); ++i)
    EXPECT_TRUE(all_close(lazy_out[i].to(Device::cpu()), eager[i], 1e-4, 1e-4))
        << name << " output " << i;
  lazy::Metrics m = lazy::metrics();
  // One sync: a graph is built only on a cache miss (another test may have compiled this one).
  EXPECT_EQ(m.syncs, 1) << m.to_string();
  EXPECT_EQ(m.cache_hits + m.cache_misses, 1) << m.to_string();
  EXPECT_EQ(m.graphs_built, m.cache_misses) << m.to_string();
  EXPECT_EQ(m.executions, 1);
}

INSTANTIATE_TEST_SUITE_P(Zoo, LazyModel, ::testing::ValuesIn(model_names()),
                         [](const auto& info) { return info.param; });

TEST(LazyModels, TrainModeBatchNormStateEqualsEager) {
  auto eager = small_model("resnet18", 9);
  auto lz = small_model("resnet18", 9);
  eager->module->train();
  lz->module->train();
  lz->module->to(Device::lazy());
  for (uint64_t step = 0; step < 2; ++step) {
    std::vector<Tensor> in = small_inputs("resnet18", 2, 100 + step);
    Tensor e = eager->forward(in)[0];
    Tensor l = lz->forward(to_device(in, Device::lazy()))[0];
    EXPECT_TRUE(all_close(l.to(Device::cpu()), e, 1e-4, 1e-4)) << "step " << step;
  }
  auto eb = eager->module->named_buffers();
  auto lb = lz->module->named_buffers();
  ASSERT_EQ(eb.size(), lb.size());
  int checked = 0;
  for (size_t i = 0; i < eb.size(); ++i) {
    ASSERT_EQ(eb[i].first, lb[i].first);
    EXPECT_EQ(lb[i].second.device(), Device::lazy()) << lb[i].first;
    Tensor l = lb[i].second.to(Device::cpu());
    if (eb[i].first.find("num_batches_tracked") != std::string::npos) {
      EXPECT_EQ(l.item(), 2.0) << lb[i].first;
    } else {
      EXPECT_TRUE(all_close(l, eb[i].second, 1e-5, 1e-6)) << lb[i].first;
      // The state moved away from its initial value (zeros / ones).
      EXPECT_FALSE(all_close(
          l, eb[i].first.find("mean") != std::string::npos ? zeros(l.sizes()) : ones(l.sizes())))
          << lb[i].first;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 3 * 20);  // resnet18 has 20 BatchNorm layers
}

TEST(LazyModels, ParametersStayOnTheDevice) {
  auto spec = small_model("resnet18", 11);
  spec->module->eval();
  spec->module->to(Device::lazy());
  // Device buffers of the parameters before the calls.
  std::vector<const void*> buffers;
  for (const Tensor& p : spec->module->parameters()) buffers.push_back(p.raw_data());
  lazy::reset_metrics();
  const int calls = 3;
  int64_t in_bytes = 0, out_bytes = 0;
  for (int i = 0; i < calls; ++i) {
    Tensor x = small_inputs("resnet18", 2, 200 + i)[0];
    in_bytes += static_cast<int64_t>(x.nbytes());
    Tensor y = spec->forward({x.to(Device::lazy())})[0].to(Device::cpu());
    out_bytes += static_cast<int64_t>(y.nbytes());
  }
  lazy::Metrics m = lazy::metrics();
  // Only the images go to the device and only the logits come back: no parameter is copied.
  EXPECT_EQ(m.bytes_to_device, in_bytes);
  EXPECT_EQ(m.bytes_from_device, out_bytes);
  EXPECT_EQ(m.transfers_to_device, calls);
  EXPECT_EQ(m.transfers_from_device, calls);
  std::vector<const void*> after;
  for (const Tensor& p : spec->module->parameters()) after.push_back(p.raw_data());
  EXPECT_EQ(after, buffers);  // the same device buffers, never replaced
}
