#include "lathe/data/image_folder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "lathe/data/file_bytes.h"

namespace lathe::data {
namespace {

bool is_image_name(const std::filesystem::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

}  // namespace

ImageFolder::ImageFolder(const std::string& root, const ImageTransformOptions& transform)
    : transform_(transform) {
  namespace fs = std::filesystem;
  LATHE_CHECK(transform.width > 0 && transform.height > 0, "[data.ImageFolder] output size ",
              transform.width, "x", transform.height, " must be positive");
  std::error_code ec;
  LATHE_CHECK(fs::is_directory(root, ec), "[data.ImageFolder] ", root,
              " is not a directory; expected root/<class>/<image>.jpg");
  for (const auto& entry : fs::directory_iterator(root))
    if (entry.is_directory()) classes_.push_back(entry.path().filename().string());
  std::sort(classes_.begin(), classes_.end());
  LATHE_CHECK(!classes_.empty(), "[data.ImageFolder] ", root,
              " has no class subfolders; expected root/<class>/<image>.jpg");
  for (size_t c = 0; c < classes_.size(); ++c) {
    std::vector<std::string> images;
    for (const auto& entry : fs::recursive_directory_iterator(fs::path(root) / classes_[c]))
      if (entry.is_regular_file() && is_image_name(entry.path()))
        images.push_back(entry.path().string());
    std::sort(images.begin(), images.end());
    for (std::string& p : images) {
      files_.push_back(std::move(p));
      labels_.push_back(static_cast<int64_t>(c));
    }
  }
  LATHE_CHECK(!files_.empty(), "[data.ImageFolder] ", root,
              " has no .jpg, .jpeg or .png files in its class subfolders");
}

std::vector<FieldSpec> ImageFolder::fields() const {
  return {{"image", {3, transform_.height, transform_.width}, DType::f32},
          {"label", {}, DType::i64}};
}

void ImageFolder::read(int64_t index, const std::vector<void*>& out, SampleRng& rng) const {
  const std::string& p = files_[static_cast<size_t>(index)];
  std::vector<uint8_t> bytes;
  try {
    bytes = read_file_bytes(p, "data.ImageFolder");
  } catch (const Error& e) {
    throw CorruptSample(e.what());
  }
  CropDecodeScale scale(transform_, rng);
  const RgbImage image = decode_image(p, bytes, &scale);
  if (image.width == 0 || image.height == 0)
    throw CorruptSample(detail::str("[data.ImageFolder] ", p, " has an empty image"));
  crop_resize_normalize(image, scale.box(), transform_, static_cast<float*>(out[0]));
  *static_cast<int64_t*>(out[1]) = labels_[static_cast<size_t>(index)];
}

}  // namespace lathe::data
