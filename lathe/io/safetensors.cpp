#include "lathe/io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "lathe/io/half.h"

namespace lathe::io {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian data; a big-endian host needs byte swaps");

namespace {

using json = nlohmann::json;

// The format's own limit (the Rust reader refuses headers past 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// Deeper JSON than this cannot be a valid header (the deepest valid value is depth 3).
constexpr int kMaxJsonDepth = 16;

struct DTypeSpec {
  const char* name;
  size_t itemsize;
};
// Every dtype the format names with a whole-byte size; only some of them load.
constexpr DTypeSpec kDTypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
    {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
    {"F32", 4},  {"I64", 8}, {"U64", 8}, {"F64", 8},     {"C64", 8},
};

const DTypeSpec* find_dtype(const std::string& name) {
  for (const DTypeSpec& d : kDTypes)
    if (name == d.name) return &d;
  return nullptr;
}

// Lathe's dtype for a safetensors dtype that maps one to one; false for the others.
bool native_dtype(const std::string& name, DType* out) {
  static const std::pair<const char*, DType> table[] = {
      {"F32", DType::f32}, {"F64", DType::f64}, {"I64", DType::i64},
      {"I32", DType::i32}, {"BOOL", DType::b8},
  };
  for (const auto& [n, dt] : table)
    if (name == n) {
      *out = dt;
      return true;
    }
  return false;
}

const char* safetensors_dtype(DType dt) {
  switch (dt) {
    case DType::f32:
      return "F32";
    case DType::f64:
      return "F64";
    case DType::i64:
      return "I64";
    case DType::i32:
      return "I32";
    case DType::b8:
      return "BOOL";
  }
  return nullptr;
}

std::string shape_str(const std::string& dtype, const std::vector<int64_t>& shape) {
  return detail::str(dtype, shape);
}

// "[safetensors] <path>: " followed by the message.
template <class... Args>
[[noreturn]] void fail(const std::string& path, const Args&... args) {
  throw Error(detail::str("[safetensors] ", path, ": ", args...));
}

// An integer field of the header as int64 (rejects floats, and unsigned values past int64).
bool json_int(const json& v, int64_t* out) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    *out = static_cast<int64_t>(u);
    return true;
  }
  if (v.is_number_integer()) {
    *out = v.get<int64_t>();
    return true;
  }
  return false;
}

// Parses the header, refusing duplicate keys in any object (nlohmann keeps the last one
// silently) and nesting deeper than any valid header.
json parse_header(const std::string& path, const char* begin, const char* end) {
  std::vector<std::set<std::string>> open_objects;
  std::string current_entry;
  auto on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMaxJsonDepth)
      fail(path, "header JSON nests deeper than ", kMaxJsonDepth, " levels");
    switch (event) {
      case json::parse_event_t::object_start:
        open_objects.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case json::parse_event_t::key: {
        const std::string& key = parsed.get_ref<const std::string&>();
        if (open_objects.size() == 1) current_entry = key;
        if (!open_objects.empty() && !open_objects.back().insert(key).second) {
          if (open_objects.size() == 1) fail(path, "header names tensor '", key, "' twice");
          fail(path, "header entry '", current_entry, "' has field '", key, "' twice");
        }
        break;
      }
      default:
        break;
    }
    return true;
  };
  try {
    return json::parse(begin, end, on_event);
  } catch (const json::exception& e) {
    fail(path, "header is not valid JSON: ", e.what());
  }
}

// Validates one tensor entry of the header.
TensorInfo parse_entry(const std::string& path, const std::string& key, const json& v,
                       uint64_t data_size) {
  auto where = [&] { return detail::str("tensor '", key, "': "); };
  if (!v.is_object()) fail(path, where(), "entry is a JSON ", v.type_name(), ", not an object");
  TensorInfo info;

  auto dt = v.find("dtype");
  if (dt == v.end()) fail(path, where(), "entry has no 'dtype'");
  if (!dt->is_string())
    fail(path, where(), "'dtype' is a JSON ", dt->type_name(), ", not a string");
  info.dtype = dt->get<std::string>();
  const DTypeSpec* spec = find_dtype(info.dtype);
  if (!spec) fail(path, where(), "unknown dtype '", info.dtype, "'");

  auto sh = v.find("shape");
  if (sh == v.end()) fail(path, where(), "entry has no 'shape'");
  if (!sh->is_array()) fail(path, where(), "'shape' is a JSON ", sh->type_name(), ", not an array");
  // The product of max(size, 1) must fit, so numel, strides and byte counts never overflow.
  int64_t bound = static_cast<int64_t>(spec->itemsize);
  int64_t numel = 1;
  for (const json& d : *sh) {
    int64_t n;
    if (!json_int(d, &n) || n < 0)
      fail(path, where(), "shape ", sh->dump(), " has ", d.dump(), ", not a non-negative integer");
    if (__builtin_mul_overflow(bound, std::max<int64_t>(n, 1), &bound))
      fail(path, where(), "shape ", sh->dump(), " has more elements than fit in 64 bits");
    numel *= n;
    info.shape.push_back(n);
  }

  auto off = v.find("data_offsets");
  if (off == v.end()) fail(path, where(), "entry has no 'data_offsets'");
  int64_t b = 0, e = 0;
  if (!off->is_array() || off->size() != 2 || !json_int((*off)[0], &b) ||
      !json_int((*off)[1], &e) || b < 0 || e < 0)
    fail(path, where(), "data_offsets ", off->dump(),
         " is not [begin, end] with non-negative integers");
  if (b > e) fail(path, where(), "data_offsets [", b, ", ", e, "] ends before it begins");
  info.begin = static_cast<uint64_t>(b);
  info.end = static_cast<uint64_t>(e);
  if (info.end > data_size)
    fail(path, where(), "data_offsets [", b, ", ", e, "] run past the data section (", data_size,
         " bytes)");
  uint64_t need = static_cast<uint64_t>(numel) * spec->itemsize;
  if (info.end - info.begin != need)
    fail(path, where(), "data_offsets [", b, ", ", e, "] hold ", e - b, " bytes but ",
         shape_str(info.dtype, info.shape), " needs ", need);
  return info;
}

}  // namespace

// A private mapping of a whole file; unmapped when the last tensor viewing it is gone.
struct SafetensorsFile::Mapping {
  void* base = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (base) munmap(base, size);
  }
};

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, "cannot open: ", std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    fail(path, "file is ", size, " bytes, too short for the 8-byte header length");
  }
  // Copy-on-write: in-place ops on loaded tensors work, and never write to the file.
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  int map_errno = errno;
  ::close(fd);
  if (base == MAP_FAILED) fail(path, "cannot map ", size, " bytes: ", std::strerror(map_errno));
  mapping_ = std::make_shared<Mapping>();
  mapping_->base = base;
  mapping_->size = size;

  const char* bytes = static_cast<const char*>(base);
  uint64_t header_len;
  std::memcpy(&header_len, bytes, 8);
  if (header_len > kMaxHeaderBytes)
    fail(path, "header length ", header_len, " is over the format's limit of ", kMaxHeaderBytes,
         " bytes");
  if (header_len > size - 8)
    fail(path, "header length ", header_len, " runs past the end of the file (", size, " bytes)");
  const char* header = bytes + 8;
  data_ = header + header_len;
  uint64_t data_size = size - 8 - header_len;

  json j = parse_header(path, header, data_);
  if (!j.is_object()) fail(path, "header is a JSON ", j.type_name(), ", not an object");

  for (const auto& [key, v] : j.items()) {
    if (key == "__metadata__") {
      if (!v.is_object()) fail(path, "__metadata__ is a JSON ", v.type_name(), ", not an object");
      for (const auto& [mk, mv] : v.items()) {
        if (!mv.is_string())
          fail(path, "__metadata__ '", mk, "' is a JSON ", mv.type_name(), ", not a string");
        metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    infos_[key] = parse_entry(path, key, v, data_size);
  }

  // The tensors must tile the data section exactly: no overlaps, no holes (as the format
  // requires, so a file cannot hide other content between tensors).
  std::vector<const std::pair<const std::string, TensorInfo>*> order;
  for (const auto& kv : infos_) order.push_back(&kv);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) {
    return std::tie(a->second.begin, a->second.end, a->first) <
           std::tie(b->second.begin, b->second.end, b->first);
  });
  uint64_t cursor = 0;
  const std::string* prev = nullptr;
  for (const auto* kv : order) {
    const TensorInfo& info = kv->second;
    if (info.begin < cursor)
      fail(path, "tensor '", kv->first, "': data_offsets [", info.begin, ", ", info.end,
           "] overlap tensor '", *prev, "' (which ends at ", cursor, ")");
    if (info.begin > cursor)
      fail(path, "tensor '", kv->first, "': data_offsets [", info.begin, ", ", info.end,
           "] leave bytes [", cursor, ", ", info.begin, ") of the data section unused");
    cursor = info.end;
    prev = &kv->first;
  }
  if (cursor != data_size)
    fail(path, "the data section has ", data_size, " bytes but the tensors cover ", cursor);
}

SafetensorsFile::~SafetensorsFile() = default;

std::vector<std::string> SafetensorsFile::keys() const {
  std::vector<std::string> out;
  for (const auto& kv : infos_) out.push_back(kv.first);
  return out;
}

const TensorInfo& SafetensorsFile::info(const std::string& key) const {
  auto it = infos_.find(key);
  if (it == infos_.end()) fail(path_, "no tensor named '", key, "'");
  return it->second;
}

Tensor SafetensorsFile::get(const std::string& key) const {
  const TensorInfo& info = this->info(key);
  const char* src = data_ + info.begin;
  size_t nbytes = info.end - info.begin;
  Shape sizes = to_shape(info.shape);

  if (info.dtype == "F16" || info.dtype == "BF16") {
    Tensor t = empty(sizes, DType::f32);
    float* dst = nbytes ? t.data<float>() : nullptr;
    size_t n = nbytes / 2;
    bool bf16 = info.dtype == "BF16";
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      dst[i] = bf16 ? bf16_to_float(h) : half_to_float(h);
    }
    return t;
  }
  DType dt;
  if (!native_dtype(info.dtype, &dt))
    fail(path_, "tensor '", key, "': unsupported dtype ", info.dtype,
         " (Lathe loads F32, F64, I64, I32, BOOL, and F16/BF16 as f32)");
  if (dt == DType::b8) {
    // Any byte but 0 and 1 is not a bool; reading it as one is undefined behaviour.
    for (size_t i = 0; i < nbytes; ++i)
      if (static_cast<unsigned char>(src[i]) > 1)
        fail(path_, "tensor '", key, "': BOOL element ", i, " is byte ",
             static_cast<int>(static_cast<unsigned char>(src[i])), ", not 0 or 1");
  }
  if (nbytes == 0 || reinterpret_cast<uintptr_t>(src) % itemsize(dt) != 0)
    return from_buffer(src, sizes, dt);  // misaligned data: copy rather than misread

  auto impl = std::make_shared<TensorImpl>();
  // The storage keeps the mapping alive; the mapping is unmapped with the last one.
  impl->storage = Storage::wrap(const_cast<char*>(src), nbytes, [m = mapping_] {});
  impl->sizes = sizes;
  impl->strides = contiguous_strides(sizes);
  impl->dtype = dt;
  return Tensor(std::move(impl));
}

std::map<std::string, Tensor> load_safetensors(const std::string& path) {
  SafetensorsFile file(path);
  std::map<std::string, Tensor> out;
  for (const std::string& k : file.keys()) out.emplace(k, file.get(k));
  return out;
}

namespace {

// Buffered writer that reports the path and the OS error on failure.
class FileWriter {
 public:
  FileWriter(const std::string& path, const std::string& shown) : path_(path), shown_(shown) {
    f_ = std::fopen(path.c_str(), "wb");
    if (!f_) fail(shown_, "cannot create ", path, ": ", std::strerror(errno));
  }
  ~FileWriter() {
    if (f_) std::fclose(f_);
  }
  void write(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f_) != n)
      fail(shown_, "write to ", path_, " failed: ", std::strerror(errno));
  }
  void close() {
    int rc = std::fclose(f_);
    f_ = nullptr;
    if (rc != 0) fail(shown_, "write to ", path_, " failed: ", std::strerror(errno));
  }

 private:
  std::string path_, shown_;
  FILE* f_ = nullptr;
};

// Writes a tensor's elements in logical row-major order, whatever its strides.
void write_tensor(FileWriter& w, const Tensor& t) {
  if (t.numel() == 0) return;
  const size_t item = itemsize(t.dtype());
  const char* base = static_cast<const char*>(t.raw_data());
  if (t.is_contiguous()) {
    w.write(base, t.nbytes());
    return;
  }
  std::vector<int64_t> sz = t.shape(), st = t.int_strides();
  if (sz.empty()) return w.write(base, item);
  const int64_t ndim = static_cast<int64_t>(sz.size());
  const int64_t rows = t.numel() / sz.back();
  const int64_t row_len = sz.back(), row_stride = st.back();
  std::vector<char> buf;
  buf.reserve(1 << 20);
  std::vector<int64_t> idx(ndim - 1, 0);
  int64_t off = 0;  // element offset of the current row
  for (int64_t r = 0; r < rows; ++r) {
    const char* row = base + off * static_cast<int64_t>(item);
    if (row_stride == 1) {
      buf.insert(buf.end(), row, row + row_len * item);
    } else {
      for (int64_t i = 0; i < row_len; ++i) {
        const char* e = row + i * row_stride * static_cast<int64_t>(item);
        buf.insert(buf.end(), e, e + item);
      }
    }
    if (buf.size() >= (1 << 20)) {
      w.write(buf.data(), buf.size());
      buf.clear();
    }
    for (int64_t d = ndim - 2; d >= 0; --d) {
      if (++idx[d] < sz[d]) {
        off += st[d];
        break;
      }
      off -= st[d] * (sz[d] - 1);
      idx[d] = 0;
    }
  }
  w.write(buf.data(), buf.size());
}

}  // namespace

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // Data order: larger elements first, then by name, so every tensor stays aligned to its
  // element size (the data section starts 8-aligned), as the Python writer does.
  std::vector<const std::pair<const std::string, Tensor>*> order;
  for (const auto& kv : tensors) {
    const Tensor& t = kv.second;
    if (kv.first == "__metadata__") fail(path, "'__metadata__' cannot name a tensor");
    if (!t.defined()) fail(path, "tensor '", kv.first, "' is undefined");
    if (!t.has_storage())
      fail(path, "tensor '", kv.first, "' ", t.shape_string(),
           " has no data (fake or lazy); sync it or move it to the CPU first");
    order.push_back(&kv);
  }
  std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) {
    return itemsize(a->second.dtype()) > itemsize(b->second.dtype());
  });

  json header = json::object();
  uint64_t offset = 0;
  for (const auto* kv : order) {
    const Tensor& t = kv->second;
    uint64_t n = t.nbytes();
    header[kv->first] = {{"dtype", safetensors_dtype(t.dtype())},
                         {"shape", t.shape()},
                         {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {
    fail(path, "cannot write the header (names and metadata must be UTF-8): ", e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  uint64_t header_len = text.size();

  // Write beside the target and rename: a failed save keeps the old file, and tensors still
  // mapped from the old file (loaded from this very path) stay valid.
  std::string tmp = detail::str(path, ".tmp.", ::getpid());
  try {
    FileWriter w(tmp, path);
    w.write(&header_len, 8);
    w.write(text.data(), text.size());
    for (const auto* kv : order) write_tensor(w, kv->second);
    w.close();
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    fail(path, "cannot rename ", tmp, " into place: ", std::strerror(err));
  }
}

}  // namespace lathe::io
