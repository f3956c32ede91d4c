// The per-sample random generator of data augmentation: splitmix64 seeded from (seed, epoch,
// position in the epoch), so a sample's crop and flip are the same whichever worker reads it.
#pragma once

#include <cstdint>

namespace lathe::data {

class SampleRng {
 public:
  explicit SampleRng(uint64_t seed) : state_(seed) {}
  // The generator of sample `position` of `epoch` under a loader seeded with `seed`.
  static SampleRng for_sample(uint64_t seed, uint64_t epoch, uint64_t position) {
    SampleRng mix(seed ^ 0x9e3779b97f4a7c15ull);
    uint64_t s = mix.next_u64() ^ (epoch * 0xbf58476d1ce4e5b9ull);
    SampleRng mix2(s);
    return SampleRng(mix2.next_u64() ^ (position * 0x94d049bb133111ebull));
  }
  uint64_t next_u64() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform in [0, n), n > 0.
  uint64_t below(uint64_t n) { return next_u64() % n; }

 private:
  uint64_t state_;
};

}  // namespace lathe::data
