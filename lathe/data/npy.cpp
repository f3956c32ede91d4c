#include "lathe/data/npy.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace lathe::data {
namespace {

// The value text of `key` in the header dict ("'descr': '<f4', ..."), up to its end.
std::string dict_value(const std::string& path, const std::string& dict, const std::string& key) {
  const std::string k = "'" + key + "'";
  size_t p = dict.find(k);
  LATHE_CHECK(p != std::string::npos, "[data.npy] ", path, ": the header has no ", k,
              " entry: ", dict);
  p = dict.find(':', p + k.size());
  LATHE_CHECK(p != std::string::npos, "[data.npy] ", path, ": bad header ", dict);
  ++p;
  while (p < dict.size() && dict[p] == ' ') ++p;
  size_t end = p;
  if (p < dict.size() && dict[p] == '(') {
    end = dict.find(')', p);
    LATHE_CHECK(end != std::string::npos, "[data.npy] ", path, ": unterminated shape in ", dict);
    return dict.substr(p, end - p + 1);
  }
  if (p < dict.size() && dict[p] == '\'') {
    end = dict.find('\'', p + 1);
    LATHE_CHECK(end != std::string::npos, "[data.npy] ", path, ": unterminated string in ", dict);
    return dict.substr(p + 1, end - p - 1);
  }
  while (end < dict.size() && dict[end] != ',' && dict[end] != '}') ++end;
  return dict.substr(p, end - p);
}

std::vector<int64_t> parse_shape(const std::string& path, const std::string& text) {
  std::vector<int64_t> shape;
  size_t i = 1;
  while (i < text.size() - 1) {
    while (i < text.size() && (text[i] == ' ' || text[i] == ',')) ++i;
    if (i >= text.size() - 1) break;
    LATHE_CHECK(text[i] >= '0' && text[i] <= '9', "[data.npy] ", path, ": bad shape ", text);
    int64_t v = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      LATHE_CHECK(v < (int64_t{1} << 48), "[data.npy] ", path, ": dimension too large in ", text);
      v = v * 10 + (text[i++] - '0');
    }
    shape.push_back(v);
  }
  return shape;
}

struct Mapping {
  void* base = MAP_FAILED;
  size_t size = 0;
  ~Mapping() {
    if (base != MAP_FAILED) munmap(base, size);
  }
};

template <class From, class To>
Tensor widen(const uint8_t* src, const std::vector<int64_t>& shape, size_t count, DType dt) {
  Tensor t = empty(Shape(shape.begin(), shape.end()), dt);
  To* dst = static_cast<To*>(t.raw_data());
  for (size_t i = 0; i < count; ++i) {
    From v;
    std::memcpy(&v, src + i * sizeof(From), sizeof(From));
    dst[i] = static_cast<To>(v);
  }
  return t;
}

}  // namespace

NpyHeader parse_npy_header(const std::string& path, const uint8_t* b, size_t size) {
  static const char kMagic[] = "\x93NUMPY";
  LATHE_CHECK(size >= 10, "[data.npy] ", path, " is truncated: ", size,
              " bytes, shorter than a .npy preamble");
  LATHE_CHECK(std::memcmp(b, kMagic, 6) == 0, "[data.npy] ", path,
              " has a wrong magic: not a .npy file (expected \\x93NUMPY)");
  const int major = b[6];
  LATHE_CHECK(major >= 1 && major <= 3, "[data.npy] ", path, ": unsupported format version ", major,
              ".", int(b[7]), " (1, 2 and 3 are supported)");
  size_t len = 0, start = 10;
  if (major == 1) {
    len = b[8] | (size_t{b[9]} << 8);
  } else {
    LATHE_CHECK(size >= 12, "[data.npy] ", path, " is truncated inside its preamble");
    len = b[8] | (size_t{b[9]} << 8) | (size_t{b[10]} << 16) | (size_t{b[11]} << 24);
    start = 12;
  }
  LATHE_CHECK(start + len <= size, "[data.npy] ", path, " is truncated: the header claims ", len,
              " bytes, the file has ", size - start, " after the preamble");
  const std::string dict(reinterpret_cast<const char*>(b + start), len);
  LATHE_CHECK(dict.find('{') != std::string::npos, "[data.npy] ", path,
              ": the header is not a dict: ", dict);
  NpyHeader h;
  h.descr = dict_value(path, dict, "descr");
  const std::string fortran = dict_value(path, dict, "fortran_order");
  LATHE_CHECK(fortran == "False", "[data.npy] ", path, ": fortran_order ", fortran,
              " is not supported; save a C-ordered array (np.ascontiguousarray)");
  h.shape = parse_shape(path, dict_value(path, dict, "shape"));
  h.data_offset = start + len;
  return h;
}

Tensor load_npy(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  LATHE_CHECK(fd >= 0, "[data.npy] cannot open ", path, ": ", std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  auto map = std::make_shared<Mapping>();
  map->size = static_cast<size_t>(st.st_size);
  if (map->size > 0)
    map->base = ::mmap(nullptr, map->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  LATHE_CHECK(map->size == 0 || map->base != MAP_FAILED, "[data.npy] cannot map ", path, ": ",
              std::strerror(errno));
  const auto* bytes = static_cast<const uint8_t*>(map->size ? map->base : nullptr);
  const NpyHeader h = parse_npy_header(path, bytes, map->size);
  struct Kind {
    const char* descr;
    size_t size;
  };
  static const Kind kKinds[] = {{"<f4", 4}, {"<f8", 8}, {"<i4", 4}, {"<i8", 8},
                                {"<f2", 2}, {"|b1", 1}, {"|u1", 1}, {"|i1", 1},
                                {"<i2", 2}, {"<u2", 2}, {"<u4", 4}};
  size_t elem = 0;
  for (const Kind& k : kKinds)
    if (h.descr == k.descr) elem = k.size;
  LATHE_CHECK(elem != 0, "[data.npy] ", path, ": dtype '", h.descr, "' is not supported ",
              "(little-endian f4, f8, f2, i4, i8, b1, u1, i1, i2, u2, u4)");
  size_t count = 1;
  for (int64_t d : h.shape) count *= static_cast<size_t>(d);
  LATHE_CHECK(map->size - h.data_offset >= count * elem, "[data.npy] ", path,
              " is truncated: shape ", h.shape, " of ", h.descr, " needs ", count * elem,
              " bytes, the file has ", map->size - h.data_offset);
  const uint8_t* src = bytes + h.data_offset;
  const std::string& d = h.descr;
  if (d == "|u1") return widen<uint8_t, int32_t>(src, h.shape, count, DType::i32);
  if (d == "|i1") return widen<int8_t, int32_t>(src, h.shape, count, DType::i32);
  if (d == "<i2") return widen<int16_t, int32_t>(src, h.shape, count, DType::i32);
  if (d == "<u2") return widen<uint16_t, int32_t>(src, h.shape, count, DType::i32);
  if (d == "<u4") return widen<uint32_t, int64_t>(src, h.shape, count, DType::i64);
  const DType dt = d == "<f4"   ? DType::f32
                   : d == "<f8" ? DType::f64
                   : d == "<i4" ? DType::i32
                   : d == "<i8" ? DType::i64
                   : d == "<f2" ? DType::f16
                                : DType::b8;
  const Shape sizes(h.shape.begin(), h.shape.end());
  if (reinterpret_cast<uintptr_t>(src) % elem != 0) return from_buffer(src, sizes, dt);
  return from_blob(const_cast<uint8_t*>(src), sizes, contiguous_strides(sizes), dt, [map] {});
}

}  // namespace lathe::data
