// CIFAR-10's binary version (cifar-10-batches-bin): files of 3073-byte records, a label byte
// then 1024 red, 1024 green and 1024 blue bytes of a 32x32 image. Samples: "image" [3, 32, 32]
// f32 ((pixel / 255 - mean[c]) / std[c]) and "label" [] i64.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "lathe/data/dataset.h"

namespace lathe::data {

struct Cifar10Options {
  std::array<float, 3> mean{0.0f, 0.0f, 0.0f};
  std::array<float, 3> std{1.0f, 1.0f, 1.0f};
};

class Cifar10Dataset : public Dataset {
 public:
  static constexpr int64_t kRecordBytes = 3073;
  // The records of every file, in order.
  explicit Cifar10Dataset(const std::vector<std::string>& batch_files,
                          const Cifar10Options& options = {});
  // data_batch_1.bin ... data_batch_5.bin (train) or test_batch.bin in `folder`.
  static Cifar10Dataset from_folder(const std::string& folder, bool train,
                                    const Cifar10Options& options = {});

  int64_t size() const override { return static_cast<int64_t>(owner_.size()); }
  std::vector<FieldSpec> fields() const override;
  // Throws CorruptSample for a label byte above 9, naming the file and the record.
  void read(int64_t index, const std::vector<void*>& out, SampleRng& rng) const override;

 private:
  Cifar10Options options_;
  std::vector<std::string> files_;
  std::vector<std::vector<uint8_t>> bytes_;          // per file
  std::vector<std::pair<uint32_t, int64_t>> owner_;  // sample -> (file, record)
};

}  // namespace lathe::data
