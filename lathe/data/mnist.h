// MNIST (and Fashion-MNIST, KMNIST) in the idx format of yann.lecun.com: an images file
// (magic 0x00000803, [n, rows, cols] unsigned bytes) and a labels file (magic 0x00000801, [n]),
// each plain or gzipped. Samples: "image" [1, rows, cols] f32 (pixel / 255, then
// (x - mean) / std) and "label" [] i64.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lathe/data/dataset.h"

namespace lathe::data {

// An idx file's dimensions and unsigned-byte payload (the only element type MNIST uses).
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
};
// Reads an idx file of unsigned bytes with `expected_dims` dimensions (plain or gzipped);
// throws naming the file for a wrong magic, a wrong element type or a truncated payload.
IdxArray read_idx(const std::string& path, int expected_dims);

struct MnistOptions {
  float mean = 0.0f;  // 0.1307 and 0.3081 are MNIST's usual values
  float std = 1.0f;
  int64_t num_classes = 10;  // labels must be in [0, num_classes)
};

class MnistDataset : public Dataset {
 public:
  MnistDataset(const std::string& images_path, const std::string& labels_path,
               const MnistOptions& options = {});
  // The train (train-images-idx3-ubyte, train-labels-idx1-ubyte) or test (t10k-...) pair in
  // `folder`, each also found with a .gz suffix or a '.' before "idx".
  static MnistDataset from_folder(const std::string& folder, bool train,
                                  const MnistOptions& options = {});

  int64_t size() const override { return n_; }
  std::vector<FieldSpec> fields() const override;
  // Throws CorruptSample for a label outside [0, num_classes).
  void read(int64_t index, const std::vector<void*>& out, SampleRng& rng) const override;

 private:
  std::string labels_path_;
  MnistOptions options_;
  int64_t n_ = 0, rows_ = 0, cols_ = 0;
  std::vector<uint8_t> pixels_, labels_;
};

}  // namespace lathe::data
