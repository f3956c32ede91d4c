#include "lathe/data/array_dataset.h"

#include <cstring>

#include "lathe/data/npy.h"
#include "lathe/io/safetensors.h"

namespace lathe::data {

ArrayDataset::ArrayDataset(std::vector<std::pair<std::string, Tensor>> columns) {
  LATHE_CHECK(!columns.empty(), "[data.ArrayDataset] no arrays given");
  for (size_t c = 0; c < columns.size(); ++c) {
    const auto& [name, t] = columns[c];
    LATHE_CHECK(t.defined() && t.dim() >= 1, "[data.ArrayDataset] array '", name,
                "' must have a first (sample) dimension");
    std::vector<int64_t> shape = t.shape();
    if (c == 0) n_ = shape[0];
    LATHE_CHECK(shape[0] == n_, "[data.ArrayDataset] array '", name, "' has ", shape[0],
                " rows, array '", columns[0].first, "' has ", n_);
    fields_.push_back({name, std::vector<int64_t>(shape.begin() + 1, shape.end()), t.dtype()});
    columns_.push_back(t.contiguous());
  }
}

ArrayDataset ArrayDataset::from_npy(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<std::pair<std::string, Tensor>> cols;
  for (const auto& [name, path] : files) cols.emplace_back(name, load_npy(path));
  return ArrayDataset(std::move(cols));
}

ArrayDataset ArrayDataset::from_safetensors(const std::string& path,
                                            const std::vector<std::string>& keys) {
  io::SafetensorsFile file(path);
  std::vector<std::pair<std::string, Tensor>> cols;
  for (const std::string& k : keys) {
    LATHE_CHECK(file.contains(k), "[data.ArrayDataset] ", path, " has no tensor '", k, "'; it has ",
                file.keys());
    cols.emplace_back(k, file.get(k));
  }
  return ArrayDataset(std::move(cols));
}

void ArrayDataset::read(int64_t index, const std::vector<void*>& out, SampleRng&) const {
  for (size_t c = 0; c < columns_.size(); ++c) {
    const size_t row = fields_[c].nbytes();
    std::memcpy(out[c], static_cast<const char*>(columns_[c].raw_data()) + row * index, row);
  }
}

}  // namespace lathe::data
