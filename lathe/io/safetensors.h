// Safetensors files (https://github.com/huggingface/safetensors): load by memory-mapping the file
// so tensors view it with no copy, save any tensor layout. Every field of an untrusted file is
// checked before it is used; a bad file throws lathe::Error naming the file and the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lathe/core/tensor.h"

namespace lathe::nn {
class Module;
}

namespace lathe::io {

// What the header says about one tensor, after validation.
struct TensorInfo {
  std::string dtype;  // safetensors' name: "F32", "BF16", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets into the data section, [begin, end)
  uint64_t end = 0;
};

// An open, validated safetensors file. The file is mapped copy-on-write (MAP_PRIVATE): tensors
// from get() view the mapping, writes to them never reach the file, and the mapping lives until
// the last tensor viewing it and this object are gone.
class SafetensorsFile {
 public:
  // Maps and validates the whole header (every entry, offsets cover the data section exactly).
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // Tensor names, sorted.
  std::vector<std::string> keys() const;
  bool contains(const std::string& key) const { return infos_.count(key) != 0; }
  // The header entry of a tensor; throws for an unknown key.
  const TensorInfo& info(const std::string& key) const;
  // The "__metadata__" string map (empty when the file has none).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The tensor named key. F32/F64/BF16/F16/I64/I32/BOOL view the mapping in their own dtype (a
  // copy only when the data is not aligned to the element size). Other dtypes throw
  // "unsupported dtype".
  Tensor get(const std::string& key) const;

 private:
  struct Mapping;
  std::string path_;
  std::shared_ptr<Mapping> mapping_;
  const char* data_ = nullptr;  // start of the data section
  std::map<std::string, TensorInfo> infos_;
  std::map<std::string, std::string> metadata_;
};

// Every tensor of the file by name (views of the mapping; see SafetensorsFile::get).
std::map<std::string, Tensor> load_safetensors(const std::string& path);

// Writes tensors (any strides; bytes in logical row-major order) and the metadata strings.
// Supported dtypes: f32, f64, i64, i32, bool. The file is written next to `path` and renamed
// into place, so a failed save leaves any earlier file intact.
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Loads a file into a module's parameters and buffers (by state_dict name). With strict, a
// missing or unexpected key is an error; shapes must match always.
void load_into(nn::Module& m, const std::string& path, bool strict = true);
// Saves a module's state_dict.
void save_from(const nn::Module& m, const std::string& path);

}  // namespace lathe::io
