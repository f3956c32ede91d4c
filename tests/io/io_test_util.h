// Helpers shared by the io tests: a scratch directory per test, raw file writers, random tensors.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "lathe/core/tensor.h"

namespace lathe::io::testing {

// A fresh directory under the system temp dir, removed when the test ends.
class ScratchDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           (std::string("lathe_io_") + std::to_string(::getpid()) + "_" + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << path;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// The 8-byte little-endian length prefix.
inline std::string length_prefix(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// A file with this exact header text and data section.
inline std::string make_file(const std::string& header, const std::string& data) {
  return length_prefix(header.size()) + header + data;
}

// A random tensor of the given dtype (never all zeros), contiguous.
inline Tensor random_tensor(const Shape& sizes, DType dt, uint64_t seed) {
  std::mt19937_64 rng(seed);
  int64_t n = shape_numel(sizes).expect_int();
  switch (dt) {
    case DType::f32: {
      std::normal_distribution<float> d(0.f, 1.f);
      std::vector<float> v(n);
      for (auto& x : v) x = d(rng);
      return from_vector(v, sizes);
    }
    case DType::f64: {
      std::normal_distribution<double> d(0., 1.);
      std::vector<double> v(n);
      for (auto& x : v) x = d(rng);
      return from_vector(v, sizes);
    }
    case DType::i64: {
      std::uniform_int_distribution<int64_t> d(-(int64_t{1} << 40), int64_t{1} << 40);
      std::vector<int64_t> v(n);
      for (auto& x : v) x = d(rng);
      return from_vector(v, sizes);
    }
    case DType::i32: {
      std::uniform_int_distribution<int32_t> d(-100000, 100000);
      std::vector<int32_t> v(n);
      for (auto& x : v) x = d(rng);
      return from_vector(v, sizes);
    }
    case DType::b8: {
      std::vector<bool> v(n);
      for (int64_t i = 0; i < n; ++i) v[i] = (rng() & 1) != 0;
      return from_vector(v, sizes);
    }
    case DType::bf16:
    case DType::f16:
      return random_tensor(sizes, DType::f32, seed).to(dt);
  }
  return Tensor();
}

// Checks the message of a lathe::Error thrown by fn contains every piece.
template <class F>
void expect_error(F&& fn, const std::vector<std::string>& pieces) {
  try {
    fn();
    ADD_FAILURE() << "expected a lathe::Error containing '" << pieces.front() << "'";
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const std::string& p : pieces)
      EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg << "\nmissing: " << p;
  }
}

}  // namespace lathe::io::testing
