#include "lathe/data/image_transform.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace lathe::data {
namespace {

CropBox center_fit(const ImageTransformOptions& o, int w, int h) {
  // RandomResizedCrop's fallback: the largest centered crop with the ratio clamped to range.
  const double in_ratio = static_cast<double>(w) / h;
  double cw = w, ch = h;
  if (in_ratio < o.ratio[0]) {
    ch = std::round(cw / o.ratio[0]);
  } else if (in_ratio > o.ratio[1]) {
    cw = std::round(ch * o.ratio[1]);
  }
  return {(w - cw) / 2, (h - ch) / 2, cw, ch, false};
}

// Per output coordinate: the first source index and the weight of the second tap.
struct Taps {
  std::vector<int> index;
  std::vector<float> weight;
};

Taps make_taps(int out, double start, double length, double scale, int limit, bool flip) {
  Taps t;
  t.index.resize(static_cast<size_t>(out));
  t.weight.resize(static_cast<size_t>(out));
  const double step = length / out;
  for (int i = 0; i < out; ++i) {
    const int k = flip ? out - 1 - i : i;
    double s = (start + (k + 0.5) * step) * scale - 0.5;
    s = std::clamp(s, 0.0, static_cast<double>(limit - 1));
    int i0 = static_cast<int>(s);
    if (i0 >= limit - 1) i0 = std::max(0, limit - 2);
    t.index[static_cast<size_t>(i)] = i0;
    t.weight[static_cast<size_t>(i)] = limit > 1 ? static_cast<float>(s - i0) : 0.0f;
  }
  return t;
}

}  // namespace

CropBox choose_crop(const ImageTransformOptions& o, int w, int h, SampleRng& rng) {
  CropBox box{0, 0, static_cast<double>(w), static_cast<double>(h), false};
  if (o.crop == ImageTransformOptions::Crop::random_resized) {
    const double area = static_cast<double>(w) * h;
    const double lr0 = std::log(o.ratio[0]), lr1 = std::log(o.ratio[1]);
    bool found = false;
    for (int attempt = 0; attempt < 10 && !found; ++attempt) {
      const double target = area * rng.uniform(o.scale[0], o.scale[1]);
      const double aspect = std::exp(rng.uniform(lr0, lr1));
      const double cw = std::round(std::sqrt(target * aspect));
      const double ch = std::round(std::sqrt(target / aspect));
      if (cw > 0 && ch > 0 && cw <= w && ch <= h) {
        box.y = static_cast<double>(rng.below(static_cast<uint64_t>(h - ch) + 1));
        box.x = static_cast<double>(rng.below(static_cast<uint64_t>(w - cw) + 1));
        box.width = cw;
        box.height = ch;
        found = true;
      }
    }
    if (!found) box = center_fit(o, w, h);
  } else if (o.crop == ImageTransformOptions::Crop::center) {
    const double s = static_cast<double>(o.resize_shorter) / std::min(w, h);
    box.width = std::min<double>(w, o.width / s);
    box.height = std::min<double>(h, o.height / s);
    box.x = (w - box.width) / 2;
    box.y = (h - box.height) / 2;
  }
  box.flip = o.flip_probability > 0 && rng.uniform() < o.flip_probability;
  return box;
}

double CropDecodeScale::min_fraction(int full_width, int full_height) {
  box_ = choose_crop(o_, full_width, full_height, rng_);
  return std::max(o_.width / box_.width, o_.height / box_.height);
}

void crop_resize_normalize(const RgbImage& image, const CropBox& box,
                           const ImageTransformOptions& o, float* out) {
  const double sx = static_cast<double>(image.width) / image.full_width;
  const double sy = static_cast<double>(image.height) / image.full_height;
  const Taps xs = make_taps(o.width, box.x, box.width, sx, image.width, box.flip);
  const Taps ys = make_taps(o.height, box.y, box.height, sy, image.height, false);
  float scale[3], shift[3];
  for (int c = 0; c < 3; ++c) {
    scale[c] = 1.0f / (255.0f * o.std[c]);
    shift[c] = o.mean[c] / o.std[c];
  }
  const size_t plane = static_cast<size_t>(o.width) * o.height;
  const size_t stride = static_cast<size_t>(image.width) * 3;
  const int dx = image.width > 1 ? 3 : 0;
  const size_t dy = image.height > 1 ? stride : 0;
  for (int y = 0; y < o.height; ++y) {
    const uint8_t* r0 = &image.rgb[static_cast<size_t>(ys.index[static_cast<size_t>(y)]) * stride];
    const uint8_t* r1 = r0 + dy;
    const float wy = ys.weight[static_cast<size_t>(y)];
    float* d0 = out + static_cast<size_t>(y) * o.width;
    for (int x = 0; x < o.width; ++x) {
      const int ix = xs.index[static_cast<size_t>(x)] * 3;
      const float wx = xs.weight[static_cast<size_t>(x)];
      for (int c = 0; c < 3; ++c) {
        const float top = r0[ix + c] + wx * (r0[ix + dx + c] - r0[ix + c]);
        const float bottom = r1[ix + c] + wx * (r1[ix + dx + c] - r1[ix + c]);
        d0[c * plane + static_cast<size_t>(x)] = (top + wy * (bottom - top)) * scale[c] - shift[c];
      }
    }
  }
}

}  // namespace lathe::data
