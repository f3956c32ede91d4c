// The model zoo compiled: outputs equal eager (eval, batch 2, two calls with different inputs) on
// the default "cpu" backend within kCpuTol and on the "interpreter" reference exactly, BatchNorm
// state in train mode, bert with automatic dynamic sequence lengths, and one compiled model called
// from two threads.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <tuple>

#include "lathe/core/random.h"
#include "lathe/models/registry.h"
#include "lathe/trace/compile.h"
#include "test_util.h"
#include "tests/models/small_models.h"

using namespace lathe;
using namespace lathe::models;
using lathe::test::same_values;

namespace {

BertConfig small_bert() { return test_models::small_bert(256); }
using test_models::small_vit;

std::shared_ptr<ModelSpec> small_model(const std::string& name, uint64_t seed) {
  return test_models::small_model(name, seed, 256);
}

std::vector<Tensor> small_inputs(const std::string& name, int64_t batch, uint64_t seed,
                                 int64_t seq_len = 12, int64_t image = 64) {
  InputOptions io;
  io.image_size = name == "vit" ? 0 : image;  // vit takes its configured size
  io.seq_len = seq_len;
  if (name == "bert") io.bert = small_bert();
  if (name == "vit") io.vit = small_vit();
  return default_inputs(name, batch, seed, io);
}

::testing::AssertionResult all_same(const std::vector<Tensor>& a, const std::vector<Tensor>& b,
                                    double tol = 0.0) {
  if (a.size() != b.size())
    return ::testing::AssertionFailure() << a.size() << " vs " << b.size() << " outputs";
  for (size_t i = 0; i < a.size(); ++i) {
    auto r = same_values(a[i], b[i], tol);
    if (!r) return r << " (output " << i << ")";
  }
  return ::testing::AssertionSuccess();
}

// The cpu backend folds batch norm into the convolution weights and runs fused oneDNN
// primitives (post-op activations, residual sums), which round differently from eager's
// separate kernels: relative differences of about 1e-6 on these small models. The interpreter
// runs the eager kernels and must match exactly.
constexpr double kCpuTol = 1e-4;

class CompiledModel : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

}  // namespace

TEST_P(CompiledModel, EqualsEagerInEvalTwice) {
  const auto& [name, backend] = GetParam();
  auto spec = small_model(name, 1);
  CompileOptions options;
  options.backend = backend;
  auto f = compile(spec->module, options);
  const double tol = backend == "interpreter" ? 0.0 : kCpuTol;
  for (uint64_t seed : {7, 8}) {
    auto in = small_inputs(name, 2, seed);
    auto want = spec->forward(in);
    auto got = f(in);
    EXPECT_TRUE(all_same(got, want, tol)) << name << " on " << backend << " seed " << seed;
  }
  EXPECT_EQ(f.stats().compiles, 1) << name;
  EXPECT_EQ(f.stats().hits, 1) << name;
}

INSTANTIATE_TEST_SUITE_P(
    Zoo, CompiledModel,
    ::testing::Combine(::testing::Values("resnet18", "resnet50", "resnext50_32x4d", "alexnet",
                                         "vgg16", "mobilenet_v2", "mnasnet1_0", "squeezenet1_1",
                                         "bert", "vit"),
                       ::testing::Values("cpu", "interpreter")),
    [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

class CompiledTrainMode : public ::testing::TestWithParam<std::string> {};

TEST_P(CompiledTrainMode, BatchNormStateMatchesEager) {
  const std::string name = GetParam();
  auto eager = small_model(name, 2);
  auto compiled = small_model(name, 2);
  eager->module->train();
  compiled->module->train();
  auto f = compile(compiled->module);
  for (uint64_t i = 0; i < 3; ++i) {
    auto in = small_inputs(name, 2, 40 + i, 12, 32);
    // Dropout draws from the default generator at run time, in eager and compiled alike.
    manual_seed(500 + i);
    auto want = eager->forward(in);
    manual_seed(500 + i);
    auto got = f(in);
    EXPECT_TRUE(all_same(got, want, 1e-5)) << name << " call " << i;
  }
  EXPECT_EQ(f.stats().compiles, 1);
  auto want_buffers = eager->module->named_buffers();
  auto got_buffers = compiled->module->named_buffers();
  ASSERT_EQ(want_buffers.size(), got_buffers.size());
  for (size_t i = 0; i < want_buffers.size(); ++i)
    EXPECT_TRUE(same_values(got_buffers[i].second, want_buffers[i].second, 1e-6))
        << name << " " << want_buffers[i].first;
}

INSTANTIATE_TEST_SUITE_P(Zoo, CompiledTrainMode, ::testing::Values("resnet18", "mobilenet_v2"));

TEST(CompiledBert, AutoDynamicSequenceLengthsCompileAtMostTwice) {
  auto spec = small_model("bert", 3);
  auto f = compile(spec->module);  // auto
  for (int64_t seq = 16; seq <= 256; seq += 16) {
    auto in = small_inputs("bert", 2, 100 + seq, seq);
    auto want = spec->forward(in);
    auto got = f(in);
    EXPECT_TRUE(all_same(got, want, kCpuTol)) << "seq " << seq;
  }
  EXPECT_LE(f.stats().compiles, 2) << f.last_recompile_reason();
  EXPECT_EQ(f.stats().eager_calls, 0);
}

TEST(CompiledResnet, TwoThreadsFiftyCallsEachEqualEager) {
  auto spec = small_model("resnet18", 4);
  auto f = compile(spec->module);
  std::vector<std::vector<Tensor>> inputs;
  std::vector<std::vector<Tensor>> want;
  for (uint64_t s = 0; s < 4; ++s) {
    inputs.push_back(small_inputs("resnet18", 2, 200 + s, 12, 32));
    want.push_back(spec->forward(inputs.back()));
  }
  std::atomic<int> mismatches{0}, errors{0};
  auto worker = [&](int t) {
    for (int i = 0; i < 50; ++i) {
      size_t k = static_cast<size_t>(i + t) % inputs.size();
      try {
        if (!all_same(f(inputs[k]), want[k], kCpuTol)) ++mismatches;
      } catch (const std::exception& e) {
        if (errors++ == 0) ADD_FAILURE() << e.what();
      }
    }
  };
  std::thread a(worker, 0), b(worker, 1);
  a.join();
  b.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(f.stats().compiles, 1);
  EXPECT_EQ(f.stats().calls, 100);
}

TEST(CompiledResnet, AutoDynamicBatchCompilesTwice) {
  auto spec = small_model("resnet18", 5);
  auto f = compile(spec->module);
  for (int64_t batch : {2, 3, 4, 5}) {
    auto in = small_inputs("resnet18", batch, 300 + batch, 12, 32);
    EXPECT_TRUE(all_same(f(in), spec->forward(in), kCpuTol)) << "batch " << batch;
  }
  EXPECT_EQ(f.stats().compiles, 2) << f.last_recompile_reason();
  EXPECT_TRUE(lathe::test::contains(f.graph_string(0), "f32[s0,")) << f.graph_string(0);
}
