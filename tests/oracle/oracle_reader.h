// A small safetensors reader for the oracle tests (kept here so the tests do not depend on
// lathe/io): tensors by name plus the string metadata of the header.
#pragma once

#include <map>
#include <string>

#include "lathe/core/tensor.h"

namespace lathe::oracle {

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;        // contiguous CPU tensors
  std::map<std::string, std::string> metadata;  // the header's "__metadata__"
};

// Reads a whole .safetensors file (dtypes F32, F64, I64, I32, BOOL). Throws lathe::Error
// "[oracle_reader] ..." naming the file on a malformed or unsupported file.
SafetensorsFile read_safetensors(const std::string& path);

}  // namespace lathe::oracle
