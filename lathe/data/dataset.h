// Datasets: what the DataLoader reads. A random-access Dataset has a size and fixed per-sample
// field shapes, and writes sample i straight into the batch tensors' storage (no per-sample
// tensor, no copy at collation). An IterableDataset yields samples in its own order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lathe/base/error.h"
#include "lathe/core/dtype.h"
#include "lathe/data/sample_rng.h"

namespace lathe::data {

// The shape and dtype of one field of every sample ("image" [3,224,224] f32, "label" [] i64).
struct FieldSpec {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::f32;
  // Bytes of one sample's field.
  size_t nbytes() const;
};

// Thrown by a dataset for a sample it cannot read (corrupt file, label out of range). The
// loader's skip_corrupt option skips exactly these, with a warning; any other exception stops
// the epoch and surfaces in the caller's thread.
class CorruptSample : public Error {
 public:
  explicit CorruptSample(const std::string& what) : Error(what) {}
};

// Random access. read() may be called from several worker threads at once.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual std::vector<FieldSpec> fields() const = 0;
  // Writes sample `index` into out[f], one pointer per field (out[f] has fields()[f].nbytes()
  // bytes). `rng` is this sample's own generator (random augmentations): it depends on the
  // loader's seed, the epoch and the sample's position in the epoch, not on the thread.
  virtual void read(int64_t index, const std::vector<void*>& out, SampleRng& rng) const = 0;
};

// Samples in the dataset's own order (a stream, a generator). The loader reads it on one
// producer thread, so next() needs no locking; batching and prefetch work as for Dataset.
class IterableDataset {
 public:
  virtual ~IterableDataset() = default;
  virtual std::vector<FieldSpec> fields() const = 0;
  // Starts a pass over the data (epoch numbers from 0).
  virtual void reset(uint64_t epoch) = 0;
  // Writes the next sample into out and returns true, or returns false at the end.
  virtual bool next(const std::vector<void*>& out, SampleRng& rng) = 0;
};

}  // namespace lathe::data
