// An image classification folder: root/<class>/<image>.{jpg,jpeg,png}, classes in sorted order
// (label = the class's position), images sorted by path. Samples: "image" [3, height, width]
// f32 through ImageTransformOptions, "label" [] i64.
#pragma once

#include <string>
#include <vector>

#include "lathe/data/dataset.h"
#include "lathe/data/image_transform.h"

namespace lathe::data {

class ImageFolder : public Dataset {
 public:
  // Lists the files (not read until a sample is). Throws for a missing root or no images.
  ImageFolder(const std::string& root, const ImageTransformOptions& transform = {});

  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  std::vector<FieldSpec> fields() const override;
  // Reads, decodes and transforms one image; a corrupt file throws CorruptSample naming it.
  void read(int64_t index, const std::vector<void*>& out, SampleRng& rng) const override;

  const std::vector<std::string>& classes() const { return classes_; }
  const std::string& path(int64_t index) const { return files_[static_cast<size_t>(index)]; }
  int64_t label(int64_t index) const { return labels_[static_cast<size_t>(index)]; }

 private:
  ImageTransformOptions transform_;
  std::vector<std::string> classes_;
  std::vector<std::string> files_;
  std::vector<int64_t> labels_;
};

}  // namespace lathe::data
