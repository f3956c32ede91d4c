// The image pipeline of training and evaluation, fused into one pass per image: choose a crop
// (random-resized-crop, or resize-then-center-crop), resample it bilinearly to the output size
// with an optional horizontal flip, and normalize into planar f32 written straight into the
// batch. The crop is chosen from the file's size before decoding, so a JPEG is decoded only as
// large as the crop needs (DecodeScale).
#pragma once

#include <array>
#include <cstdint>

#include "lathe/data/image_decode.h"
#include "lathe/data/sample_rng.h"

namespace lathe::data {

struct ImageTransformOptions {
  enum class Crop {
    random_resized,  // torchvision's RandomResizedCrop(size, scale, ratio)
    center,          // Resize(resize_shorter) then CenterCrop(size)
    resize,          // the whole image resized to the output size
  };
  Crop crop = Crop::random_resized;
  int width = 224, height = 224;
  std::array<double, 2> scale{0.08, 1.0};             // random_resized: area fraction
  std::array<double, 2> ratio{3.0 / 4.0, 4.0 / 3.0};  // random_resized: aspect range
  int resize_shorter = 256;                           // center: the shorter side before cropping
  double flip_probability = 0.5;                      // horizontal flip
  std::array<float, 3> mean{0.485f, 0.456f, 0.406f};
  std::array<float, 3> std{0.229f, 0.224f, 0.225f};
};

// A crop in the file's full-size pixel coordinates.
struct CropBox {
  double x = 0, y = 0, width = 0, height = 0;
  bool flip = false;
};

// Draws the crop (and flip) of an image of the given full size.
CropBox choose_crop(const ImageTransformOptions& o, int full_width, int full_height,
                    SampleRng& rng);

// Resamples `box` of `image` (box in full-size coordinates; the image may be DCT-scaled) into
// out: [3, o.height, o.width] f32, normalized.
void crop_resize_normalize(const RgbImage& image, const CropBox& box,
                           const ImageTransformOptions& o, float* out);

// The DecodeScale for a crop: the decoded image keeps at least the output's resolution.
class CropDecodeScale : public DecodeScale {
 public:
  CropDecodeScale(const ImageTransformOptions& o, SampleRng& rng) : o_(o), rng_(rng) {}
  double min_fraction(int full_width, int full_height) override;
  const CropBox& box() const { return box_; }

 private:
  const ImageTransformOptions& o_;
  SampleRng& rng_;
  CropBox box_;
};

}  // namespace lathe::data
