// Samplers: the order of a dataset's indices for one epoch. Each is a pure function of its
// settings and the epoch number, so any number of workers sees the same order.
#pragma once

#include <cstdint>
#include <vector>

namespace lathe::data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  // The indices of epoch `epoch` (from 0), in order.
  virtual std::vector<int64_t> indices(uint64_t epoch) const = 0;
  // How many indices every epoch has.
  virtual int64_t size() const = 0;
};

// 0, 1, ..., n-1 every epoch.
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(int64_t n);
  std::vector<int64_t> indices(uint64_t epoch) const override;
  int64_t size() const override { return n_; }

 private:
  int64_t n_;
};

// A permutation of 0..n-1 drawn from (seed, epoch): the same seed and epoch give the same order,
// each epoch a different one.
class ShuffleSampler : public Sampler {
 public:
  ShuffleSampler(int64_t n, uint64_t seed);
  std::vector<int64_t> indices(uint64_t epoch) const override;
  int64_t size() const override { return n_; }

 private:
  int64_t n_;
  uint64_t seed_;
};

// One rank's shard for data-parallel training, as PyTorch's DistributedSampler: the epoch's
// order (shuffled from (seed, epoch) or sequential) is padded by repeating its start to a
// multiple of world_size (or cut to one with drop_last), and rank r takes every world_size-th
// index from r. The shards are disjoint up to the padding, cover the dataset, and have equal
// lengths, so every rank runs the same number of steps.
struct DistributedSamplerOptions {
  int64_t rank = 0;
  int64_t world_size = 1;
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;
};
class DistributedSampler : public Sampler {
 public:
  DistributedSampler(int64_t n, const DistributedSamplerOptions& options);
  std::vector<int64_t> indices(uint64_t epoch) const override;
  int64_t size() const override { return per_rank_; }

 private:
  int64_t n_;
  DistributedSamplerOptions o_;
  int64_t per_rank_;
};

// The permutation ShuffleSampler uses (Fisher-Yates driven by SampleRng).
std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed, uint64_t epoch);

}  // namespace lathe::data
