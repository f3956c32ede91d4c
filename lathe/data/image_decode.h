// Decoding JPEG (libjpeg-turbo) and PNG (libpng) into 8-bit RGB. A JPEG much larger than what
// the caller needs is decoded at 1/2, 1/4 or 1/8 of its size by libjpeg-turbo's DCT scaling
// (scale_num / scale_denom), which skips most of the inverse DCT work.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lathe::data {

// Interleaved RGB, rows top to bottom.
struct RgbImage {
  int width = 0, height = 0;            // as decoded
  int full_width = 0, full_height = 0;  // the file's size before DCT scaling
  std::vector<uint8_t> rgb;
};

// Chooses how small a JPEG may be decoded: given the file's size, the smallest fraction (in
// (0, 1]) of it the caller can use. The decoder picks the smallest n/8 at least that.
class DecodeScale {
 public:
  virtual ~DecodeScale() = default;
  virtual double min_fraction(int full_width, int full_height) = 0;
};

// Decodes a JPEG or PNG (told apart by their magic bytes). Throws CorruptSample naming `path`
// for a file that is neither, truncated, or corrupt. `scale` may be null (full size).
RgbImage decode_image(const std::string& path, const std::vector<uint8_t>& bytes,
                      DecodeScale* scale);

}  // namespace lathe::data
