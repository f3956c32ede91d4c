#include "lathe/data/file_bytes.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "lathe/base/error.h"

namespace lathe::data {

bool is_file(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

std::vector<uint8_t> read_file_bytes(const std::string& path, const char* component) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  LATHE_CHECK(in, "[", component, "] cannot open ", path, ": ", std::strerror(errno));
  const std::streamoff size = in.tellg();
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), size);
  LATHE_CHECK(in, "[", component, "] error reading ", path);
  return bytes;
}

std::vector<uint8_t> read_maybe_gzipped(const std::string& path, const char* component) {
  LATHE_CHECK(is_file(path), "[", component, "] cannot open ", path, ": no such file");
  gzFile f = gzopen(path.c_str(), "rb");
  LATHE_CHECK(f, "[", component, "] cannot open ", path, ": ", std::strerror(errno));
  std::vector<uint8_t> out;
  uint8_t buf[1 << 16];
  for (;;) {
    const int n = gzread(f, buf, sizeof(buf));
    if (n < 0) {
      int code = 0;
      const std::string msg = gzerror(f, &code);
      gzclose(f);
      throw Error(detail::str("[", component, "] ", path, " is not a valid gzip file (", msg,
                              "); re-download it or pass the uncompressed file"));
    }
    if (n == 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  int code = 0;
  const std::string msg = gzerror(f, &code);
  gzclose(f);
  LATHE_CHECK(code == Z_OK || code == Z_STREAM_END, "[", component, "] ", path,
              " is a truncated or corrupt gzip file (", msg, ")");
  return out;
}

}  // namespace lathe::data
