// NumPy .npy files (format versions 1-3), memory-mapped. Little-endian f32, f64, i32, i64,
// f16 and bool arrays view the mapping with no copy (writes stay private to the process);
// u8, i8, i16, u16 widen to i32 and u32 to i64 (a copy). A bad header throws naming the file
// and the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lathe/core/tensor.h"

namespace lathe::data {

// What a .npy header says, after validation.
struct NpyHeader {
  std::string descr;  // "<f4", "|u1", ...
  std::vector<int64_t> shape;
  size_t data_offset = 0;  // bytes before the array data
};

// Parses the header of a .npy file's first bytes (`size`: the file's length).
NpyHeader parse_npy_header(const std::string& path, const uint8_t* bytes, size_t size);
// The array of a .npy file (see the header comment for which dtypes are mapped).
Tensor load_npy(const std::string& path);

}  // namespace lathe::data
