// Helpers of the data tests: a temporary folder per test, writing bytes, checking that a call
// throws with a message containing given words.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace lathe::data::testing {

// A fresh directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("lathe_data_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  static int& counter() {
    static int c = 0;
    return c;
  }
  std::filesystem::path path_;
};

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// The message of the exception `f` throws (fails the test when it throws none).
template <class E = std::exception>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception";
  return "";
}

}  // namespace lathe::data::testing

#define EXPECT_ERROR_HAS(stmt, ...)                                           \
  do {                                                                        \
    const std::string msg_ = ::lathe::data::testing::error_of([&] { stmt; }); \
    for (const char* part_ : {__VA_ARGS__})                                   \
      EXPECT_NE(msg_.find(part_), std::string::npos)                          \
          << "message: " << msg_ << "\nmissing: " << part_;                   \
  } while (0)
