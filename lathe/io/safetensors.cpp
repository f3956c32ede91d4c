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

#include "lathe/io/safetensors_header.h"
#include "lathe/io/untrusted_text.h"

namespace lathe::io {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian data; a big-endian host needs byte swaps");

namespace {

using json = nlohmann::json;

// The format's own limit (the Rust reader refuses headers past 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// Lathe's dtype for a safetensors dtype that maps one to one; false for the others.
bool native_dtype(const std::string& name, DType* out) {
  static const std::pair<const char*, DType> table[] = {
      {"F32", DType::f32}, {"F64", DType::f64},   {"I64", DType::i64}, {"I32", DType::i32},
      {"BOOL", DType::b8}, {"BF16", DType::bf16}, {"F16", DType::f16},
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
    case DType::bf16:
      return "BF16";
    case DType::f16:
      return "F16";
  }
  return nullptr;
}

// "[safetensors] <path>: " followed by the message.
template <class... Args>
[[noreturn]] void fail(const std::string& path, const Args&... args) {
  throw Error(detail::str("[safetensors] ", path, ": ", args...));
}

// A name for what a path is when it is not a regular file.
const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "of an unknown kind";
}

// Opens path read-only and returns its descriptor and size, refusing anything but a regular
// file. O_NONBLOCK: opening a FIFO with no writer would otherwise block forever in open().
int open_regular_file(const std::string& path, uint64_t* size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) fail(path, "cannot open: ", std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    fail(path, "cannot stat: ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file: it is ", file_type_name(st.st_mode));
  }
  *size = static_cast<uint64_t>(st.st_size);
  return fd;
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
  uint64_t size = 0;
  int fd = open_regular_file(path, &size);
  if (size < 8) {
    ::close(fd);
    fail(path, "file is ", size, " bytes, too short for the 8-byte header length");
  }
  // Copy-on-write, so in-place ops on loaded tensors work and never write to the file; with no
  // reservation, so the kernel does not charge the whole file against memory up front (a file
  // larger than memory and swap still maps: only pages that are written cost memory).
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
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
  detail::SafetensorsHeader parsed =
      detail::parse_safetensors_header(path, {header, header_len}, size - 8 - header_len);
  infos_ = std::move(parsed.tensors);
  metadata_ = std::move(parsed.metadata);
}

SafetensorsFile::~SafetensorsFile() = default;

std::vector<std::string> SafetensorsFile::keys() const {
  std::vector<std::string> out;
  for (const auto& kv : infos_) out.push_back(kv.first);
  return out;
}

const TensorInfo& SafetensorsFile::info(const std::string& key) const {
  auto it = infos_.find(key);
  if (it == infos_.end()) fail(path_, "no tensor named '", detail::printable(key), "'");
  return it->second;
}

Tensor SafetensorsFile::get(const std::string& key) const {
  const TensorInfo& info = this->info(key);
  const char* src = data_ + info.begin;
  size_t nbytes = info.end - info.begin;
  Shape sizes = to_shape(info.shape);

  DType dt;
  if (!native_dtype(info.dtype, &dt))
    fail(path_, "tensor '", detail::printable(key), "': unsupported dtype ", info.dtype,
         " (Lathe loads F32, F64, BF16, F16, I64, I32 and BOOL)");
  if (dt == DType::b8) {
    // Any byte but 0 and 1 is not a bool; reading it as one is undefined behaviour.
    for (size_t i = 0; i < nbytes; ++i)
      if (static_cast<unsigned char>(src[i]) > 1)
        fail(path_, "tensor '", detail::printable(key), "': BOOL element ", i, " is byte ",
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
