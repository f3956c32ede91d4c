// DataLoader: batches of a Dataset (in a Sampler's order) or of an IterableDataset, read by
// worker threads that write each sample straight into its batch tensors, prefetched ahead of
// the caller. The batches and their order depend only on the dataset, the sampler, the seed and
// the epoch: 0, 1 or 8 workers give the same tensors.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lathe/core/tensor.h"
#include "lathe/data/dataset.h"
#include "lathe/data/sampler.h"

namespace lathe::data {

// One batch: a tensor per field, [batch, field shape...] in the field's dtype.
using Batch = std::vector<Tensor>;

// Where an epoch stands, for progress lines on long epochs.
struct LoaderProgress {
  int64_t batches = 0;        // batches returned so far this epoch
  int64_t total_batches = 0;  // batches this epoch (-1 for an IterableDataset: not known)
  int64_t samples = 0;        // samples in them
  int64_t skipped = 0;        // corrupt samples skipped (skip_corrupt)
  double seconds = 0;         // since the epoch started
  double samples_per_second() const { return seconds > 0 ? samples / seconds : 0.0; }
  // "batch 120/782  3840 samples  1234.5 samples/s  eta 10.3 s"
  std::string format() const;
};

struct DataLoaderOptions {
  int64_t batch_size = 1;
  // 0 reads in the caller's thread inside next(); n > 0 starts n threads per epoch.
  int num_workers = 0;
  // Batches each worker may have ready ahead of the caller.
  int prefetch_batches = 2;
  // Drops the last batch when it is smaller than batch_size.
  bool drop_last = false;
  // With no sampler given: a ShuffleSampler seeded with `seed` (else sequential).
  bool shuffle = false;
  // Seeds the shuffle and every sample's augmentation generator (SampleRng::for_sample).
  uint64_t seed = 0;
  // Skips samples whose read throws CorruptSample, reporting each through `warn`; the batch
  // holding one comes out smaller. Off: the error surfaces from next().
  bool skip_corrupt = false;
  // Receives the skip warnings, on the caller's thread, in sample order (default: stderr).
  std::function<void(const std::string&)> warn;
  // Called from next() every `progress_every` batches (0: never) and after the last batch.
  int64_t progress_every = 0;
  std::function<void(const LoaderProgress&)> on_progress;
};

class DataLoader {
 public:
  // Random access in `sampler`'s order (default: sequential, or shuffled with options.shuffle).
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options,
             std::shared_ptr<const Sampler> sampler = nullptr);
  // A stream: one producer thread when num_workers > 0 (the stream's order is its own).
  DataLoader(std::shared_ptr<IterableDataset> dataset, DataLoaderOptions options);
  // Stops and joins the workers, mid-epoch included.
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Starts epoch `epoch` (from 0), stopping any unfinished one.
  void start_epoch(uint64_t epoch);
  // The next batch of the epoch, or nullopt at its end. A worker's exception is rethrown here,
  // in order (the batches before it come out first).
  std::optional<Batch> next();
  // Batches per epoch of a random-access dataset (-1 for an IterableDataset).
  int64_t num_batches() const;
  LoaderProgress progress() const;
  const DataLoaderOptions& options() const { return options_; }

  struct Epoch;  // one epoch's workers and ready batches (data_loader.cpp)

 private:
  std::shared_ptr<const Dataset> dataset_;
  std::shared_ptr<IterableDataset> iterable_;
  std::shared_ptr<const Sampler> sampler_;
  DataLoaderOptions options_;
  std::unique_ptr<Epoch> epoch_;
};

}  // namespace lathe::data
