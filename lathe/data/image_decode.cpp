#include "lathe/data/image_decode.h"

#include <csetjmp>
#include <cstdio>
#include <cstring>
// libjpeg's headers need FILE and size_t declared first.
#include <jerror.h>
#include <jpeglib.h>
#include <png.h>

#include "lathe/data/dataset.h"

namespace lathe::data {
namespace {

// Larger images are refused (a corrupt or hostile header could claim 65535 x 65535).
constexpr size_t kMaxPixels = size_t{1} << 28;

struct JpegErrors {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_fail(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings are ignored except a premature end of data (a truncated file), which libjpeg would
// otherwise fill with gray.
void jpeg_message(j_common_ptr cinfo, int level) {
  if (level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) jpeg_fail(cinfo);
}

// Plain C control flow only between setjmp and the last libjpeg call: a longjmp must not skip
// a C++ destructor. Returns false with e->message set on error.
bool decode_jpeg_raw(const uint8_t* data, size_t size, DecodeScale* scale, RgbImage* out,
                     JpegErrors* e) {
  jpeg_decompress_struct cinfo;
  cinfo.err = jpeg_std_error(&e->mgr);
  e->mgr.error_exit = jpeg_fail;
  e->mgr.emit_message = jpeg_message;
  if (setjmp(e->jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  out->full_width = static_cast<int>(cinfo.image_width);
  out->full_height = static_cast<int>(cinfo.image_height);
  cinfo.out_color_space = JCS_RGB;
  cinfo.scale_num = 8;
  cinfo.scale_denom = 8;
  if (scale) {
    const double f = scale->min_fraction(out->full_width, out->full_height);
    unsigned num = 1;
    while (num < 8 && num < f * 8.0) ++num;
    cinfo.scale_num = num;
  }
  cinfo.dct_method = JDCT_ISLOW;
  jpeg_start_decompress(&cinfo);
  out->width = static_cast<int>(cinfo.output_width);
  out->height = static_cast<int>(cinfo.output_height);
  if (static_cast<size_t>(out->width) * out->height > kMaxPixels) {
    std::snprintf(e->message, sizeof(e->message), "%dx%d pixels is more than the 2^28 allowed",
                  out->width, out->height);
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  out->rgb.resize(static_cast<size_t>(out->width) * out->height * 3);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = &out->rgb[static_cast<size_t>(cinfo.output_scanline) * out->width * 3];
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

RgbImage decode_png(const std::string& path, const std::vector<uint8_t>& bytes,
                    DecodeScale* scale) {
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, bytes.data(), bytes.size()))
    throw CorruptSample(detail::str("[data.image] ", path, " is a corrupt PNG: ", image.message));
  image.format = PNG_FORMAT_RGB;
  RgbImage out;
  out.width = out.full_width = static_cast<int>(image.width);
  out.height = out.full_height = static_cast<int>(image.height);
  if (static_cast<size_t>(out.width) * out.height > kMaxPixels) {
    png_image_free(&image);
    throw CorruptSample(detail::str("[data.image] ", path, ": ", out.width, "x", out.height,
                                    " pixels is more than the 2^28 allowed"));
  }
  if (scale) scale->min_fraction(out.width, out.height);  // PNG has no scaled decode
  out.rgb.resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, out.rgb.data(), 0, nullptr)) {
    const std::string msg = image.message;
    png_image_free(&image);
    throw CorruptSample(
        detail::str("[data.image] ", path, " is a corrupt or truncated PNG: ", msg));
  }
  return out;
}

}  // namespace

RgbImage decode_image(const std::string& path, const std::vector<uint8_t>& bytes,
                      DecodeScale* scale) {
  const size_t n = bytes.size();
  if (n >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF) {
    RgbImage out;
    JpegErrors errors{};
    if (!decode_jpeg_raw(bytes.data(), n, scale, &out, &errors))
      throw CorruptSample(
          detail::str("[data.image] ", path, " is a corrupt or truncated JPEG: ", errors.message));
    return out;
  }
  if (n >= 8 && std::memcmp(bytes.data(), "\x89PNG\r\n\x1a\n", 8) == 0)
    return decode_png(path, bytes, scale);
  char head[32] = "";
  for (size_t i = 0; i < std::min<size_t>(n, 4); ++i)
    std::snprintf(head + 3 * i, 4, "%02x ", bytes[i]);
  throw CorruptSample(detail::str("[data.image] ", path, " is neither a JPEG nor a PNG (",
                                  n == 0 ? "empty file" : "first bytes ", head,
                                  "); expected FF D8 FF or 89 50 4E 47"));
}

}  // namespace lathe::data
