// Seedable random number generation for factories and initializers.
#pragma once

#include <cstdint>
#include <mutex>
#include <random>

#include "lathe/core/tensor.h"

namespace lathe {

// A seedable stream of random numbers (64-bit Mersenne Twister). Thread-safe.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0x5eed) : engine_(seed) {}
  void seed(uint64_t s);
  double uniform(double lo, double hi);
  double normal(double mean, double stddev);
  int64_t randint(int64_t lo, int64_t hi);  // [lo, hi)

  // Fills a tensor's elements (any layout) in place.
  void fill_uniform(const Tensor& t, double lo, double hi);
  void fill_normal(const Tensor& t, double mean, double stddev);

  // The engine's state, and setting it back: the draws after set_state(s) repeat those after
  // state() returned s (compile's verification mode runs one call twice).
  std::mt19937_64 state();
  void set_state(const std::mt19937_64& s);

 private:
  std::mutex mu_;
  std::mt19937_64 engine_;
};

// The process-wide default generator (as torch's default CPU generator).
Generator& default_generator();
// Seeds the default generator.
void manual_seed(uint64_t seed);

// Uniform [0, 1).
Tensor rand(const Shape& sizes, DType dtype = DType::f32, Generator* gen = nullptr);
// Standard normal.
Tensor randn(const Shape& sizes, DType dtype = DType::f32, Generator* gen = nullptr);
// Integers uniform in [low, high).
Tensor randint(int64_t low, int64_t high, const Shape& sizes, DType dtype = DType::i64,
               Generator* gen = nullptr);

}  // namespace lathe
