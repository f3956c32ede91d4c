// load_into / save_from: a module's state_dict through a safetensors file.
#include <gtest/gtest.h>

#include "lathe/io/safetensors.h"
#include "lathe/nn/module.h"
#include "tests/io/io_test_util.h"

namespace lathe::io {
namespace {

using testing::expect_error;
using testing::random_tensor;

// Parameters, persistent buffers and one non-persistent buffer (never saved).
class TinyBlock : public nn::Module {
 public:
  explicit TinyBlock(uint64_t seed) {
    register_parameter("weight", random_tensor({3, 4}, DType::f32, seed));
    register_parameter("bias", random_tensor({3}, DType::f32, seed + 1));
    register_buffer("running_mean", random_tensor({3}, DType::f32, seed + 2));
    register_buffer("num_batches_tracked", random_tensor({}, DType::i64, seed + 3));
    register_buffer("scratch", random_tensor({2}, DType::f32, seed + 4), /*persistent=*/false);
  }
};

class TinyNet : public nn::Module {
 public:
  explicit TinyNet(uint64_t seed) {
    register_module("block", nn::make<TinyBlock>(seed));
    register_parameter("scale", random_tensor({1}, DType::f64, seed + 10));
  }
};

class ModuleIo : public testing::ScratchDirTest {};

void expect_state_equal(const nn::Module& got, const nn::Module& want) {
  auto g = got.state_dict(), w = want.state_dict();
  ASSERT_EQ(g.size(), w.size());
  for (const auto& [k, t] : w) {
    ASSERT_TRUE(g.count(k)) << k;
    EXPECT_EQ(g.at(k).dtype(), t.dtype()) << k;
    EXPECT_EQ(g.at(k).to_vector<double>(), t.to_vector<double>()) << k;
  }
}

TEST_F(ModuleIo, SaveFromThenLoadIntoCopiesEveryPersistentTensor) {
  TinyNet a(1), b(100);
  save_from(a, path("net.safetensors"));
  SafetensorsFile f(path("net.safetensors"));
  EXPECT_EQ(f.keys(), (std::vector<std::string>{"block.bias", "block.num_batches_tracked",
                                                "block.running_mean", "block.weight", "scale"}));
  Tensor b_weight = b.state_dict().at("block.weight");
  std::vector<double> b_scratch = b.child("block")->buffer("scratch").to_vector<double>();
  load_into(b, path("net.safetensors"));
  expect_state_equal(b, a);
  // Values are copied into the module's own tensors; non-persistent buffers are untouched.
  EXPECT_TRUE(b.state_dict().at("block.weight").is_same(b_weight));
  EXPECT_EQ(b.child("block")->buffer("scratch").to_vector<double>(), b_scratch);
}

TEST_F(ModuleIo, StrictReportsMissingAndUnexpectedKeys) {
  TinyNet a(1);
  auto sd = a.state_dict();
  sd.erase("scale");
  sd["extra.weight"] = random_tensor({2}, DType::f32, 5);
  save_safetensors(path("partial.safetensors"), sd);

  TinyNet b(100);
  auto before = b.state_dict().at("scale").to_vector<double>();
  expect_error([&] { load_into(b, path("partial.safetensors")); },
               {"[safetensors] " + path("partial.safetensors"),
                "1 module tensor(s) missing from the file: 'scale'",
                "1 file tensor(s) the module does not have: 'extra.weight'"});
  // Non-strict loads what matches and leaves the rest.
  load_into(b, path("partial.safetensors"), /*strict=*/false);
  EXPECT_EQ(b.state_dict().at("block.weight").to_vector<double>(),
            a.state_dict().at("block.weight").to_vector<double>());
  EXPECT_EQ(b.state_dict().at("scale").to_vector<double>(), before);
}

TEST_F(ModuleIo, ShapeMismatchIsAnErrorEvenWhenNotStrict) {
  TinyNet a(1);
  auto sd = a.state_dict();
  sd["block.weight"] = random_tensor({4, 3}, DType::f32, 6);
  save_safetensors(path("bad.safetensors"), sd);
  TinyNet b(100);
  for (bool strict : {true, false})
    expect_error([&] { load_into(b, path("bad.safetensors"), strict); },
                 {"[safetensors] " + path("bad.safetensors"),
                  "tensor 'block.weight': the file has f32[4,3] but the module has f32[3,4]"});
}

TEST_F(ModuleIo, DtypeIsConvertedToTheModules) {
  TinyNet a(1);
  auto sd = a.state_dict();
  Tensor w64 = random_tensor({3, 4}, DType::f64, 7);
  sd["block.weight"] = w64;
  save_safetensors(path("f64.safetensors"), sd);
  TinyNet b(100);
  load_into(b, path("f64.safetensors"));
  Tensor w = b.state_dict().at("block.weight");
  EXPECT_EQ(w.dtype(), DType::f32);
  auto got = w.to_vector<float>();
  auto want = w64.to_vector<double>();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], static_cast<float>(want[i]));
}

// A [1] num_batches_tracked (as some writers save it) loads into the 0-d buffer; key and shape
// problems come in one error.
TEST_F(ModuleIo, LoadIntoAcceptsOneElementForZeroDimAndReportsAllProblemsTogether) {
  TinyNet a(1);
  auto sd = a.state_dict();
  sd["block.num_batches_tracked"] = from_vector<int64_t>({42}, {1});
  save_safetensors(path("one.safetensors"), sd);
  TinyNet b(100);
  load_into(b, path("one.safetensors"));
  Tensor nbt = b.state_dict().at("block.num_batches_tracked");
  EXPECT_EQ(nbt.dim(), 0);
  EXPECT_EQ(nbt.item(), 42.0);

  sd.erase("scale");
  sd["block.weight"] = random_tensor({4, 3}, DType::f32, 6);
  save_safetensors(path("both.safetensors"), sd);
  expect_error([&] { load_into(b, path("both.safetensors")); },
               {"1 module tensor(s) missing from the file: 'scale'",
                "tensor 'block.weight': the file has f32[4,3] but the module has f32[3,4]"});
}

}  // namespace
}  // namespace lathe::io
