// A dataset of arrays sharing their first dimension: sample i is row i of each (features and
// labels, token sequences). The arrays may view memory-mapped files (load_npy, safetensors),
// so only the rows a batch reads are paged in.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lathe/core/tensor.h"
#include "lathe/data/dataset.h"

namespace lathe::data {

class ArrayDataset : public Dataset {
 public:
  // (field name, array) pairs; every array has >= 1 dimension and the same first size.
  explicit ArrayDataset(std::vector<std::pair<std::string, Tensor>> columns);
  // Each field from a .npy file: (field name, path).
  static ArrayDataset from_npy(const std::vector<std::pair<std::string, std::string>>& files);
  // The named tensors of a safetensors file (memory-mapped by lathe/io), as fields.
  static ArrayDataset from_safetensors(const std::string& path,
                                       const std::vector<std::string>& keys);

  int64_t size() const override { return n_; }
  std::vector<FieldSpec> fields() const override { return fields_; }
  void read(int64_t index, const std::vector<void*>& out, SampleRng& rng) const override;

 private:
  std::vector<Tensor> columns_;  // contiguous
  std::vector<FieldSpec> fields_;
  int64_t n_ = 0;
};

}  // namespace lathe::data
