#include "lathe/data/mnist.h"

#include "lathe/data/file_bytes.h"

namespace lathe::data {
namespace {

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

std::string find_mnist_file(const std::string& folder, const std::string& stem,
                            const std::string& kind) {
  std::vector<std::string> tried;
  for (const std::string sep : {"-", "."}) {
    for (const std::string gz : {"", ".gz"}) {
      std::string p = folder + "/" + stem + sep + kind + gz;
      if (is_file(p)) return p;
      tried.push_back(p);
    }
  }
  throw Error(detail::str("[data.mnist] no ", stem, "-", kind, " file in ", folder, "; looked for ",
                          tried));
}

}  // namespace

IdxArray read_idx(const std::string& path, int expected_dims) {
  std::vector<uint8_t> b = read_maybe_gzipped(path, "data.idx");
  LATHE_CHECK(b.size() >= 4, "[data.idx] ", path, " is truncated: ", b.size(),
              " bytes, an idx file starts with a 4-byte magic");
  LATHE_CHECK(b[0] == 0 && b[1] == 0, "[data.idx] ", path, " has a wrong magic (first bytes ",
              int(b[0]), ",", int(b[1]), ", expected 0,0): not an idx file");
  LATHE_CHECK(b[2] == 0x08, "[data.idx] ", path, " holds element type 0x", std::hex, int(b[2]),
              std::dec, "; only unsigned bytes (0x08) are supported");
  LATHE_CHECK(b[3] == expected_dims, "[data.idx] ", path, " has ", int(b[3]),
              " dimensions, expected ", expected_dims, " (images have 3, labels 1)");
  const size_t header = 4 + 4 * static_cast<size_t>(b[3]);
  LATHE_CHECK(b.size() >= header, "[data.idx] ", path, " is truncated inside its header (",
              b.size(), " bytes, the header has ", header, ")");
  IdxArray a;
  size_t count = 1;
  for (int d = 0; d < b[3]; ++d) {
    a.dims.push_back(be32(&b[4 + 4 * static_cast<size_t>(d)]));
    count *= static_cast<size_t>(a.dims.back());
  }
  LATHE_CHECK(b.size() - header >= count, "[data.idx] ", path, " is truncated: dims ", a.dims,
              " need ", count, " bytes of data, the file has ", b.size() - header);
  LATHE_CHECK(b.size() - header == count, "[data.idx] ", path, " has ", b.size() - header - count,
              " bytes after the data its dims ", a.dims, " describe");
  a.bytes.assign(b.begin() + static_cast<std::ptrdiff_t>(header), b.end());
  return a;
}

MnistDataset::MnistDataset(const std::string& images_path, const std::string& labels_path,
                           const MnistOptions& options)
    : labels_path_(labels_path), options_(options) {
  IdxArray images = read_idx(images_path, 3), labels = read_idx(labels_path, 1);
  LATHE_CHECK(images.dims[0] == labels.dims[0], "[data.mnist] ", images_path, " has ",
              images.dims[0], " images but ", labels_path, " has ", labels.dims[0], " labels");
  LATHE_CHECK(options.std > 0, "[data.mnist] std must be > 0, got ", options.std);
  n_ = images.dims[0];
  rows_ = images.dims[1];
  cols_ = images.dims[2];
  pixels_ = std::move(images.bytes);
  labels_ = std::move(labels.bytes);
}

MnistDataset MnistDataset::from_folder(const std::string& folder, bool train,
                                       const MnistOptions& options) {
  const std::string stem = train ? "train" : "t10k";
  const std::string images = find_mnist_file(folder, stem + "-images", "idx3-ubyte");
  const std::string labels = find_mnist_file(folder, stem + "-labels", "idx1-ubyte");
  return MnistDataset(images, labels, options);
}

std::vector<FieldSpec> MnistDataset::fields() const {
  return {{"image", {1, rows_, cols_}, DType::f32}, {"label", {}, DType::i64}};
}

void MnistDataset::read(int64_t index, const std::vector<void*>& out, SampleRng&) const {
  const int64_t label = labels_[static_cast<size_t>(index)];
  if (label >= options_.num_classes)
    throw CorruptSample(detail::str("[data.mnist] ", labels_path_, ": label ", label, " of sample ",
                                    index, " is out of range [0, ", options_.num_classes, ")"));
  const size_t pixels = static_cast<size_t>(rows_ * cols_);
  const uint8_t* src = &pixels_[static_cast<size_t>(index) * pixels];
  auto* dst = static_cast<float*>(out[0]);
  const float scale = 1.0f / (255.0f * options_.std), shift = options_.mean / options_.std;
  for (size_t i = 0; i < pixels; ++i) dst[i] = src[i] * scale - shift;
  *static_cast<int64_t*>(out[1]) = label;
}

}  // namespace lathe::data
