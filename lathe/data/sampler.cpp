#include "lathe/data/sampler.h"

#include <numeric>

#include "lathe/base/error.h"
#include "lathe/data/sample_rng.h"

namespace lathe::data {

std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed, uint64_t epoch) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), int64_t{0});
  SampleRng rng = SampleRng::for_sample(seed, epoch, ~uint64_t{0});
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i + 1)));
    std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(j)]);
  }
  return p;
}

SequentialSampler::SequentialSampler(int64_t n) : n_(n) {
  LATHE_CHECK(n >= 0, "[data.SequentialSampler] size must be >= 0, got ", n);
}

std::vector<int64_t> SequentialSampler::indices(uint64_t) const {
  std::vector<int64_t> p(static_cast<size_t>(n_));
  std::iota(p.begin(), p.end(), int64_t{0});
  return p;
}

ShuffleSampler::ShuffleSampler(int64_t n, uint64_t seed) : n_(n), seed_(seed) {
  LATHE_CHECK(n >= 0, "[data.ShuffleSampler] size must be >= 0, got ", n);
}

std::vector<int64_t> ShuffleSampler::indices(uint64_t epoch) const {
  return seeded_permutation(n_, seed_, epoch);
}

DistributedSampler::DistributedSampler(int64_t n, const DistributedSamplerOptions& options)
    : n_(n), o_(options) {
  LATHE_CHECK(o_.world_size >= 1, "[data.DistributedSampler] world_size must be >= 1, got ",
              o_.world_size);
  LATHE_CHECK(o_.rank >= 0 && o_.rank < o_.world_size, "[data.DistributedSampler] rank ", o_.rank,
              " is outside [0, ", o_.world_size, ")");
  LATHE_CHECK(n >= 0, "[data.DistributedSampler] size must be >= 0, got ", n);
  LATHE_CHECK(o_.drop_last || n > 0, "[data.DistributedSampler] the dataset is empty");
  per_rank_ = o_.drop_last ? n / o_.world_size : (n + o_.world_size - 1) / o_.world_size;
}

std::vector<int64_t> DistributedSampler::indices(uint64_t epoch) const {
  std::vector<int64_t> all;
  if (o_.shuffle) {
    all = seeded_permutation(n_, o_.seed, epoch);
  } else {
    all.resize(static_cast<size_t>(n_));
    std::iota(all.begin(), all.end(), int64_t{0});
  }
  const auto total = static_cast<size_t>(per_rank_ * o_.world_size);
  // Padding repeats the order from its start (as often as needed for tiny datasets).
  for (size_t i = 0; all.size() < total; ++i) all.push_back(all[i]);
  all.resize(total);
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(per_rank_));
  for (size_t i = static_cast<size_t>(o_.rank); i < total; i += static_cast<size_t>(o_.world_size))
    mine.push_back(all[i]);
  return mine;
}

}  // namespace lathe::data
