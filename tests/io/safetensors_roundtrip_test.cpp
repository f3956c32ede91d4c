// Save/load round trips: every dtype, any layout, 0-d and empty tensors, metadata, zero-copy
// views of the mapping and their lifetime.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "lathe/io/safetensors.h"
#include "tests/io/io_test_util.h"

namespace lathe::io {
namespace {

using testing::expect_error;
using testing::make_file;
using testing::random_tensor;
using testing::read_bytes;
using testing::write_bytes;

class SafetensorsRoundTrip : public testing::ScratchDirTest {};

void expect_same(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what;
  EXPECT_EQ(got.dtype(), want.dtype()) << what;
  EXPECT_EQ(got.shape(), want.shape()) << what;
  if (want.dtype() == DType::b8)
    EXPECT_EQ(got.to_vector<bool>(), want.to_vector<bool>()) << what;
  else
    EXPECT_EQ(got.to_vector<double>(), want.to_vector<double>()) << what;
}

TEST_F(SafetensorsRoundTrip, EveryDType) {
  std::map<std::string, Tensor> tensors;
  const DType all[] = {DType::f32, DType::f64, DType::i64, DType::i32, DType::b8};
  uint64_t seed = 1;
  for (DType dt : all) tensors[dtype_name(dt)] = random_tensor({3, 5}, dt, seed++);
  save_safetensors(path("all.safetensors"), tensors);
  auto loaded = load_safetensors(path("all.safetensors"));
  ASSERT_EQ(loaded.size(), tensors.size());
  for (const auto& [k, t] : tensors) {
    expect_same(loaded.at(k), t, k);
    EXPECT_TRUE(loaded.at(k).is_contiguous()) << k;
  }
}

TEST_F(SafetensorsRoundTrip, NonContiguousLayoutsWriteLogicalOrder) {
  std::map<std::string, Tensor> tensors;
  tensors["transposed"] = random_tensor({4, 6}, DType::f32, 10).t();
  tensors["sliced"] = random_tensor({5, 9}, DType::f64, 11).slice(1, 1, 8, 3).slice(0, 1, 4);
  tensors["narrowed_i64"] = random_tensor({7, 3}, DType::i64, 12).narrow(0, 2, 4);
  tensors["selected_i32"] = random_tensor({3, 4, 5}, DType::i32, 13).select(1, 2);
  tensors["permuted_bool"] = random_tensor({2, 3, 4}, DType::b8, 14).permute({2, 0, 1});
  tensors["expanded"] = random_tensor({1, 5}, DType::f32, 15).expand({3, 5});
  // Logical NCHW over NHWC memory, as channels_last.
  Tensor cl = random_tensor({2, 4, 5, 3}, DType::f32, 16).permute({0, 3, 1, 2});
  ASSERT_TRUE(cl.is_channels_last());
  ASSERT_FALSE(cl.is_contiguous());
  tensors["channels_last"] = cl;
  // A contiguous view at a storage offset: the writer must start at the offset.
  ASSERT_TRUE(tensors["narrowed_i64"].is_contiguous());
  ASSERT_GT(tensors["narrowed_i64"].storage_offset(), 0);
  for (const auto& [k, t] : tensors) {
    if (k != "channels_last" && k != "narrowed_i64") {
      ASSERT_FALSE(t.is_contiguous()) << k;
    }
  }

  save_safetensors(path("views.safetensors"), tensors);
  auto loaded = load_safetensors(path("views.safetensors"));
  ASSERT_EQ(loaded.size(), tensors.size());
  for (const auto& [k, t] : tensors) {
    expect_same(loaded.at(k), t, k);
    EXPECT_TRUE(loaded.at(k).is_contiguous()) << k;
  }
}

TEST_F(SafetensorsRoundTrip, ZeroDimAndEmptyTensors) {
  std::map<std::string, Tensor> tensors;
  tensors["scalar"] = from_vector(std::vector<double>{-3.25}, {});
  tensors["scalar_bool"] = from_vector(std::vector<bool>{true}, {});
  tensors["empty"] = empty({0}, DType::f32);
  tensors["empty_3d"] = empty({3, 0, 2}, DType::i64);
  tensors["data"] = random_tensor({2, 3}, DType::f32, 20);
  save_safetensors(path("edge.safetensors"), tensors);
  auto loaded = load_safetensors(path("edge.safetensors"));
  EXPECT_EQ(loaded.at("scalar").dim(), 0);
  EXPECT_EQ(loaded.at("scalar").item(), -3.25);
  EXPECT_EQ(loaded.at("scalar_bool").item(), 1.0);
  EXPECT_EQ(loaded.at("empty").shape(), (std::vector<int64_t>{0}));
  EXPECT_EQ(loaded.at("empty_3d").shape(), (std::vector<int64_t>{3, 0, 2}));
  EXPECT_EQ(loaded.at("empty_3d").dtype(), DType::i64);
  expect_same(loaded.at("data"), tensors["data"], "data");

  // A file with no tensors at all.
  save_safetensors(path("none.safetensors"), {});
  EXPECT_TRUE(load_safetensors(path("none.safetensors")).empty());
}

TEST_F(SafetensorsRoundTrip, MetadataAndFileApi) {
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "h\u00e9llo \"q\""}};
  std::map<std::string, Tensor> tensors = {{"b", random_tensor({2}, DType::f32, 30)},
                                           {"a", random_tensor({3}, DType::i32, 31)}};
  save_safetensors(path("m.safetensors"), tensors, meta);
  SafetensorsFile f(path("m.safetensors"));
  EXPECT_EQ(f.metadata(), meta);
  EXPECT_EQ(f.keys(), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(f.contains("a"));
  EXPECT_FALSE(f.contains("__metadata__"));
  EXPECT_EQ(f.info("a").dtype, "I32");
  EXPECT_EQ(f.info("a").shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(f.info("b").end - f.info("b").begin, 8u);
  expect_same(f.get("b"), tensors["b"], "b");
  expect_error([&] { f.get("c"); }, {"[safetensors]", "m.safetensors", "no tensor named 'c'"});
}

TEST_F(SafetensorsRoundTrip, HeaderIsPaddedAndTensorsAligned) {
  // Names of odd lengths make the raw JSON length vary.
  std::map<std::string, Tensor> tensors = {{"x", random_tensor({3}, DType::b8, 40)},
                                           {"yy", random_tensor({1}, DType::i32, 41)},
                                           {"zzz", random_tensor({2}, DType::f64, 42)}};
  save_safetensors(path("p.safetensors"), tensors);
  std::string bytes = read_bytes(path("p.safetensors"));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ((8 + n) % 8, 0u);
  EXPECT_EQ(bytes[8], '{');
  SafetensorsFile f(path("p.safetensors"));
  for (const std::string& k : f.keys()) {
    size_t item = itemsize(tensors[k].dtype());
    EXPECT_EQ(f.info(k).begin % item, 0u) << k;
  }
}

TEST_F(SafetensorsRoundTrip, TensorsViewTheMappingWithoutCopy) {
  std::map<std::string, Tensor> tensors = {{"a", random_tensor({4, 4}, DType::f32, 50)},
                                           {"b", random_tensor({8}, DType::f32, 51)}};
  save_safetensors(path("v.safetensors"), tensors);
  std::string before = read_bytes(path("v.safetensors"));
  Tensor a, b;
  uint64_t a_begin, b_begin;
  {
    SafetensorsFile f(path("v.safetensors"));
    a = f.get("a");
    b = f.get("b");
    a_begin = f.info("a").begin;
    b_begin = f.info("b").begin;
  }  // the file object is gone; the tensors keep the mapping alive
  const char* pa = static_cast<const char*>(a.raw_data());
  const char* pb = static_cast<const char*>(b.raw_data());
  EXPECT_EQ(pb - pa, static_cast<std::ptrdiff_t>(b_begin) - static_cast<std::ptrdiff_t>(a_begin));
  expect_same(a, tensors["a"], "a");
  // Writes are copy-on-write: the tensor changes, the file does not.
  a.data<float>()[0] = 1234.5f;
  EXPECT_EQ(a.data<float>()[0], 1234.5f);
  EXPECT_EQ(read_bytes(path("v.safetensors")), before);
  EXPECT_EQ(load_safetensors(path("v.safetensors")).at("a").to_vector<float>(),
            tensors["a"].to_vector<float>());
}

TEST_F(SafetensorsRoundTrip, SavingOverTheLoadedFileKeepsOldViewsValid) {
  Tensor old_a = random_tensor({16}, DType::f64, 60);
  save_safetensors(path("w.safetensors"), {{"a", old_a}});
  auto loaded = load_safetensors(path("w.safetensors"));
  // Save the loaded (mapped) tensor and a new one over the same path.
  Tensor new_b = random_tensor({5}, DType::i64, 61);
  save_safetensors(path("w.safetensors"), {{"a", loaded.at("a")}, {"b", new_b}});
  expect_same(loaded.at("a"), old_a, "old view");
  auto again = load_safetensors(path("w.safetensors"));
  expect_same(again.at("a"), old_a, "a");
  expect_same(again.at("b"), new_b, "b");
}

TEST_F(SafetensorsRoundTrip, HalfAndBFloat16LoadInTheirOwnDtype) {
  // F16: 1, -2, 65504 (max), 2^-24 (smallest subnormal), -0, inf; BF16: 1, -pi (rounded), NaN.
  const uint16_t f16[] = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x8000, 0x7C00};
  const uint16_t bf16[] = {0x3F80, 0xC049, 0x7FC0};
  std::string data(reinterpret_cast<const char*>(f16), sizeof(f16));
  data.append(reinterpret_cast<const char*>(bf16), sizeof(bf16));
  std::string header = R"({"h":{"dtype":"F16","shape":[2,3],"data_offsets":[0,12]},)"
                       R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[12,18]}})";
  write_bytes(path("half.safetensors"), make_file(header, data));
  auto t = load_safetensors(path("half.safetensors"));
  ASSERT_EQ(t.at("h").dtype(), DType::f16);
  ASSERT_EQ(t.at("b").dtype(), DType::bf16);
  EXPECT_EQ(t.at("h").shape(), (std::vector<int64_t>{2, 3}));
  auto h = t.at("h").to_vector<float>();
  EXPECT_EQ(h[0], 1.f);
  EXPECT_EQ(h[1], -2.f);
  EXPECT_EQ(h[2], 65504.f);
  EXPECT_EQ(h[3], std::ldexp(1.f, -24));
  EXPECT_TRUE(h[4] == 0.f && std::signbit(h[4]));
  EXPECT_EQ(h[5], std::numeric_limits<float>::infinity());
  auto b = t.at("b").to_vector<float>();
  EXPECT_EQ(b[0], 1.f);
  EXPECT_EQ(b[1], -3.140625f);
  EXPECT_TRUE(std::isnan(b[2]));
  // Saved back without widening: the same bytes.
  save_safetensors(path("half2.safetensors"), t);
  auto again = load_safetensors(path("half2.safetensors"));
  ASSERT_EQ(again.at("b").dtype(), DType::bf16);
  ASSERT_EQ(again.at("h").dtype(), DType::f16);
  EXPECT_EQ(std::memcmp(again.at("h").raw_data(), f16, sizeof(f16)), 0);
  EXPECT_EQ(std::memcmp(again.at("b").raw_data(), bf16, sizeof(bf16)), 0);
}

TEST_F(SafetensorsRoundTrip, MisalignedDataIsCopiedNotMisread) {
  // A 3-byte header pad leaves the F32 data at an odd address in the mapping.
  std::vector<float> v = {1.5f, -2.25f, 3.0f};
  std::string data(reinterpret_cast<const char*>(v.data()), 12);
  std::string header = R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})";
  header += "   ";
  ASSERT_NE((8 + header.size()) % 4, 0u);
  write_bytes(path("odd.safetensors"), make_file(header, data));
  Tensor t = load_safetensors(path("odd.safetensors")).at("t");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 4, 0u);
  EXPECT_EQ(t.to_vector<float>(), v);
}

TEST_F(SafetensorsRoundTrip, SaveRejectsBadInput) {
  expect_error(
      [&] {
        save_safetensors(path("u.safetensors"), {{"x", Tensor()}});
      },
      {"[safetensors]", "u.safetensors", "tensor 'x' is undefined"});
  expect_error(
      [&] {
        save_safetensors(path("u.safetensors"), {{"__metadata__", empty({1})}});
      },
      {"'__metadata__' cannot name a tensor"});
  expect_error([&] { save_safetensors(path("no/such/dir/u.safetensors"), {}); },
               {"[safetensors]", "cannot create"});
  expect_error(
      [&] {
        save_safetensors(path("u.safetensors"), {{"x", empty({1})}}, {{"k", "bad \xff utf8"}});
      },
      {"UTF-8"});
  // Nothing half-written is left behind.
  EXPECT_FALSE(std::filesystem::exists(path("u.safetensors")));
  for (const auto& e : std::filesystem::directory_iterator(dir_))
    ADD_FAILURE() << "leftover file " << e.path();
}

}  // namespace
}  // namespace lathe::io
