#include "lathe/data/cifar10.h"

#include "lathe/data/file_bytes.h"

namespace lathe::data {

Cifar10Dataset::Cifar10Dataset(const std::vector<std::string>& batch_files,
                               const Cifar10Options& options)
    : options_(options), files_(batch_files) {
  LATHE_CHECK(!batch_files.empty(), "[data.cifar10] no batch files given");
  for (int c = 0; c < 3; ++c)
    LATHE_CHECK(options.std[c] > 0, "[data.cifar10] std[", c, "] must be > 0");
  for (size_t f = 0; f < files_.size(); ++f) {
    std::vector<uint8_t> b = read_file_bytes(files_[f], "data.cifar10");
    const size_t rem = b.size() % kRecordBytes;
    LATHE_CHECK(!b.empty() && rem == 0, "[data.cifar10] ", files_[f], " is truncated or not a ",
                "CIFAR-10 binary batch: ", b.size(), " bytes is not a whole number of ",
                kRecordBytes, "-byte records (the last has ", rem, " bytes)");
    const auto records = static_cast<int64_t>(b.size() / kRecordBytes);
    for (int64_t r = 0; r < records; ++r) owner_.emplace_back(static_cast<uint32_t>(f), r);
    bytes_.push_back(std::move(b));
  }
}

Cifar10Dataset Cifar10Dataset::from_folder(const std::string& folder, bool train,
                                           const Cifar10Options& options) {
  std::vector<std::string> files;
  if (train) {
    for (int i = 1; i <= 5; ++i) files.push_back(detail::str(folder, "/data_batch_", i, ".bin"));
  } else {
    files.push_back(folder + "/test_batch.bin");
  }
  for (const std::string& f : files)
    LATHE_CHECK(is_file(f), "[data.cifar10] ", f, " does not exist; expected the files of ",
                "cifar-10-batches-bin (data_batch_1..5.bin, test_batch.bin) in ", folder);
  return Cifar10Dataset(files, options);
}

std::vector<FieldSpec> Cifar10Dataset::fields() const {
  return {{"image", {3, 32, 32}, DType::f32}, {"label", {}, DType::i64}};
}

void Cifar10Dataset::read(int64_t index, const std::vector<void*>& out, SampleRng&) const {
  const auto [file, record] = owner_[static_cast<size_t>(index)];
  const uint8_t* rec = &bytes_[file][static_cast<size_t>(record * kRecordBytes)];
  if (rec[0] > 9)
    throw CorruptSample(detail::str("[data.cifar10] ", files_[file], ": label ", int(rec[0]),
                                    " of record ", record, " (byte offset ", record * kRecordBytes,
                                    ") is out of range [0, 10)"));
  auto* dst = static_cast<float*>(out[0]);
  for (int c = 0; c < 3; ++c) {
    const float scale = 1.0f / (255.0f * options_.std[c]);
    const float shift = options_.mean[c] / options_.std[c];
    const uint8_t* src = rec + 1 + c * 1024;
    for (int i = 0; i < 1024; ++i) dst[c * 1024 + i] = src[i] * scale - shift;
  }
  *static_cast<int64_t*>(out[1]) = rec[0];
}

}  // namespace lathe::data
