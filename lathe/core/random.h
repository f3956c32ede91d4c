// Seedable random number generation for factories and initializers.
//
// The generator is counter-based (Philox4x32-10): each counter gives 128 random bits, a pure
// function of (seed, counter), from which two values are drawn (two 53-bit uniforms, or both
// branches of one Box-Muller transform). A fill of n elements reserves ceil(n / 2) consecutive
// counters and computes every element independently: large fills run on all threads and give the
// same values whatever the thread count, the tensor's memory layout or dtype (element k in
// logical row-major order always takes value k % 2 of counter offset + k / 2).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

#include "lathe/core/tensor.h"

namespace lathe {

// Philox4x32 with 10 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", 2011):
// 128 random bits from a 128-bit counter and a 64-bit key.
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, uint64_t key);

// A seedable stream of random numbers. Thread-safe: each call reserves its counters under a lock
// and computes the numbers outside it.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0x5eed) : seed_(seed) {}
  void seed(uint64_t s);
  uint64_t initial_seed() const { return seed_; }
  // Counters consumed so far (a scalar draw takes one, a fill of n elements ceil(n / 2)).
  uint64_t offset() const;

  double uniform(double lo, double hi);
  double normal(double mean, double stddev);
  int64_t randint(int64_t lo, int64_t hi);  // [lo, hi)

  // Fill a tensor's elements (any layout) in place, in parallel.
  void fill_uniform(const Tensor& t, double lo, double hi);
  void fill_normal(const Tensor& t, double mean, double stddev);
  void fill_randint(const Tensor& t, int64_t lo, int64_t hi);

  // The stream position (seed and counter), and setting it back: the draws after set_state(s) repeat those after
  // state() returned s (compile's verification mode runs one call twice).
  struct State {
    uint64_t seed = 0;
    uint64_t offset = 0;
  };
  State state() const;
  void set_state(const State& s);

 private:
  struct Counters {
    uint64_t seed;
    uint64_t first;
  };
  Counters reserve(uint64_t n);  // the seed and the first of n fresh counters

  mutable std::mutex mu_;
  uint64_t seed_;
  uint64_t offset_ = 0;
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
