// Reading whole files for the dataset readers, with errors that name the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lathe::data {

// The bytes of `path`; throws lathe::Error "[data] cannot open <path>: <reason>".
std::vector<uint8_t> read_file_bytes(const std::string& path, const char* component);
// The bytes of a file that may be gzip-compressed (read through zlib, which passes plain files
// through); throws for a missing file or a corrupt or truncated gzip stream.
std::vector<uint8_t> read_maybe_gzipped(const std::string& path, const char* component);
// True when the path names an existing regular file.
bool is_file(const std::string& path);

}  // namespace lathe::data
