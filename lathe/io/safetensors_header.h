// The JSON header of a safetensors file, parsed and validated in one pass in time linear in its
// size (a streaming parse: no JSON tree is built, so a 100 MB header of 1.6M entries costs about
// what its TensorInfos do).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "lathe/io/safetensors.h"

namespace lathe::detail {

// Lathe reads tensors of at most this many dimensions (numpy's own limit); a file with more is
// refused on open rather than producing a tensor nothing downstream can handle.
constexpr size_t kMaxSafetensorsRank = 64;

// What a valid header says.
struct SafetensorsHeader {
  std::map<std::string, io::TensorInfo> tensors;
  std::map<std::string, std::string> metadata;
};

// Parses the header text of the file at `path` (used in messages only) whose data section holds
// data_size bytes. Throws lathe::Error naming the file, the tensor and what is wrong for a header
// that is not UTF-8 JSON (a BOM or a NUL byte included), has a duplicate key, nests too deep,
// has a malformed entry, or whose tensors do not tile the data section exactly.
SafetensorsHeader parse_safetensors_header(const std::string& path, std::string_view text,
                                           uint64_t data_size);

// The size in bytes of one element of a safetensors dtype ("F32" -> 4); 0 for an unknown name.
size_t safetensors_itemsize(std::string_view dtype);

}  // namespace lathe::detail
