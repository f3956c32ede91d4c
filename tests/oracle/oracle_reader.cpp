#include "tests/oracle/oracle_reader.h"

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

namespace lathe::oracle {
namespace {

DType parse_dtype(const std::string& s, const std::string& path, const std::string& name) {
  if (s == "F32") return DType::f32;
  if (s == "F64") return DType::f64;
  if (s == "I64") return DType::i64;
  if (s == "I32") return DType::i32;
  if (s == "BOOL") return DType::b8;
  throw Error(
      detail::str("[oracle_reader] ", path, ": tensor '", name, "' has unsupported dtype ", s));
}

}  // namespace

SafetensorsFile read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  LATHE_CHECK(in.good(), "[oracle_reader] cannot open ", path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LATHE_CHECK(bytes.size() >= 8, "[oracle_reader] ", path, " is too short (", bytes.size(),
              " bytes)");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(bytes[i]);
  LATHE_CHECK(header_len <= bytes.size() - 8, "[oracle_reader] ", path, ": header length ",
              header_len, " exceeds the file size ", bytes.size());
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + header_len);
  } catch (const nlohmann::json::exception& e) {
    throw Error(detail::str("[oracle_reader] ", path, ": bad JSON header: ", e.what()));
  }
  const char* data = bytes.data() + 8 + header_len;
  const uint64_t data_len = bytes.size() - 8 - header_len;

  SafetensorsFile file;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      for (const auto& [k, v] : entry.items()) file.metadata[k] = v.get<std::string>();
      continue;
    }
    DType dt = parse_dtype(entry.at("dtype").get<std::string>(), path, name);
    std::vector<int64_t> shape = entry.at("shape").get<std::vector<int64_t>>();
    auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
    LATHE_CHECK(offsets.size() == 2 && offsets[0] <= offsets[1] && offsets[1] <= data_len,
                "[oracle_reader] ", path, ": tensor '", name, "' has bad data_offsets");
    int64_t numel = 1;
    for (int64_t s : shape) numel *= s;
    LATHE_CHECK(offsets[1] - offsets[0] == static_cast<uint64_t>(numel) * itemsize(dt),
                "[oracle_reader] ", path, ": tensor '", name, "' of shape ", shape, " has ",
                offsets[1] - offsets[0], " bytes");
    file.tensors[name] = from_buffer(data + offsets[0], to_shape(shape), dt);
  }
  return file;
}

}  // namespace lathe::oracle
