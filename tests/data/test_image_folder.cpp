#include <gtest/gtest.h>
#include <png.h>

#include <cmath>
#include <cstdio>
#include <cstring>
// libjpeg's header needs FILE and size_t declared first.
#include <jpeglib.h>

#include "lathe/data/data_loader.h"
#include "lathe/data/image_decode.h"
#include "lathe/data/image_folder.h"
#include "tests/data/data_test_util.h"

using namespace lathe;
using namespace lathe::data;
using lathe::data::testing::TempDir;
using lathe::data::testing::write_bytes;

namespace {

// w x h RGB with a left/right split: left half `a`, right half `b`.
std::vector<uint8_t> split_image(int w, int h, std::array<uint8_t, 3> a, std::array<uint8_t, 3> b) {
  std::vector<uint8_t> px(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c)
        px[(static_cast<size_t>(y) * w + x) * 3 + c] = x < w / 2 ? a[c] : b[c];
  return px;
}

void write_jpeg(const std::string& path, int w, int h, const std::vector<uint8_t>& rgb) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_TRUE(f);
  jpeg_compress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_compress(&cinfo);
  jpeg_stdio_dest(&cinfo, f);
  cinfo.image_width = static_cast<JDIMENSION>(w);
  cinfo.image_height = static_cast<JDIMENSION>(h);
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, 95, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(&rgb[static_cast<size_t>(cinfo.next_scanline) * w * 3]);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::fclose(f);
}

void write_png(const std::string& path, int w, int h, const std::vector<uint8_t>& rgb) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(w);
  image.height = static_cast<png_uint_32>(h);
  image.format = PNG_FORMAT_RGB;
  ASSERT_TRUE(png_image_write_to_file(&image, path.c_str(), 0, rgb.data(), 0, nullptr));
}

std::vector<uint8_t> file_bytes(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

ImageTransformOptions plain(int size) {
  ImageTransformOptions o;
  o.crop = ImageTransformOptions::Crop::resize;
  o.width = o.height = size;
  o.flip_probability = 0;
  o.mean = {0, 0, 0};
  o.std = {1, 1, 1};
  return o;
}

// A folder with classes "cat" (2 JPEGs) and "dog" (1 PNG, 1 JPEG).
void write_folder(const TempDir& d) {
  const auto red_blue = split_image(64, 48, {250, 0, 0}, {0, 0, 250});
  write_jpeg(d.file("cat/a.jpg"), 64, 48, red_blue);
  write_jpeg(d.file("cat/b.JPEG"), 64, 48, red_blue);
  write_png(d.file("dog/c.png"), 64, 48, red_blue);
  write_jpeg(d.file("dog/d.jpg"), 64, 48, red_blue);
  write_bytes(d.file("dog/notes.txt"), {'h', 'i'});
}

}  // namespace

TEST(ImageFolder, ListsClassesAndDecodesJpegAndPng) {
  TempDir d;
  write_folder(d);
  ImageFolder ds(d.str(), plain(8));
  EXPECT_EQ(ds.classes(), (std::vector<std::string>{"cat", "dog"}));
  ASSERT_EQ(ds.size(), 4);
  EXPECT_EQ(ds.label(2), 1);
  for (int64_t i = 0; i < 4; ++i) {
    std::vector<float> img(3 * 8 * 8);
    int64_t label = -1;
    SampleRng rng(1);
    ds.read(i, {img.data(), &label}, rng);
    EXPECT_EQ(label, i < 2 ? 0 : 1);
    // Left columns red, right columns blue (JPEG within its rounding).
    EXPECT_NEAR(img[0 * 64 + 3 * 8 + 0], 250.0 / 255, 0.05) << ds.path(i);
    EXPECT_NEAR(img[2 * 64 + 3 * 8 + 0], 0.0, 0.05);
    EXPECT_NEAR(img[0 * 64 + 3 * 8 + 7], 0.0, 0.05);
    EXPECT_NEAR(img[2 * 64 + 3 * 8 + 7], 250.0 / 255, 0.05);
  }
}

TEST(ImageFolder, FlipAndNormalize) {
  TempDir d;
  write_png(d.file("x/a.png"), 16, 16, split_image(16, 16, {255, 255, 255}, {0, 0, 0}));
  ImageTransformOptions o = plain(4);
  o.flip_probability = 1;
  o.mean = {0.5f, 0.5f, 0.5f};
  o.std = {0.5f, 0.5f, 0.5f};
  ImageFolder ds(d.str(), o);
  std::vector<float> img(3 * 16);
  int64_t label = 0;
  SampleRng rng(0);
  ds.read(0, {img.data(), &label}, rng);
  EXPECT_FLOAT_EQ(img[0], -1.0f);  // flipped: the black half is now on the left
  EXPECT_FLOAT_EQ(img[3], 1.0f);
}

TEST(ImageFolder, RandomResizedCropUsesDctScalingAndStaysDeterministic) {
  TempDir d;
  for (int i = 0; i < 6; ++i)
    write_jpeg(d.file(detail::str("c", i % 2, "/", i, ".jpg")), 400, 300,
               split_image(400, 300, {static_cast<uint8_t>(40 * i), 100, 10}, {5, 200, 90}));
  ImageTransformOptions o;
  o.width = o.height = 32;
  auto ds = std::make_shared<ImageFolder>(d.str(), o);
  std::vector<std::vector<float>> ref;
  for (int w : {0, 1, 2}) {
    DataLoaderOptions lo;
    lo.batch_size = 4;
    lo.num_workers = w;
    lo.shuffle = true;
    lo.seed = 5;
    DataLoader l(ds, lo);
    l.start_epoch(1);
    std::vector<std::vector<float>> got;
    while (auto b = l.next()) {
      EXPECT_EQ((*b)[0].shape()[1], 3);
      got.push_back((*b)[0].to_vector<float>());
    }
    if (w == 0) ref = got;
    EXPECT_EQ(got, ref) << w << " workers";
  }
  // The scaled decode: a crop needing 1/4 of the image decodes at 2/8 or more, not full size.
  struct Quarter : DecodeScale {
    double min_fraction(int, int) override { return 0.25; }
  } quarter;
  RgbImage img = decode_image(ds->path(0), file_bytes(ds->path(0)), &quarter);
  EXPECT_EQ(img.full_width, 400);
  EXPECT_EQ(img.width, 100);
}

TEST(ImageFolder, CorruptFilesNameTheFile) {
  TempDir d;
  const auto px = split_image(32, 32, {1, 2, 3}, {4, 5, 6});
  write_jpeg(d.file("a/good.jpg"), 32, 32, px);
  write_png(d.file("a/good.png"), 32, 32, px);
  auto jpg = file_bytes(d.file("a/good.jpg")), png = file_bytes(d.file("a/good.png"));
  write_bytes(d.file("a/trunc.jpg"), std::vector<uint8_t>(jpg.begin(), jpg.begin() + 200));
  auto bad = jpg;
  for (size_t i = 20; i < 200; ++i) bad[i] = 0xFF;  // garbage in the headers
  write_bytes(d.file("a/garbage.jpg"), bad);
  write_bytes(d.file("a/trunc.png"), std::vector<uint8_t>(png.begin(), png.begin() + 60));
  write_bytes(d.file("a/text.jpg"), {'G', 'I', 'F', '8'});
  EXPECT_ERROR_HAS(decode_image("trunc.jpg", file_bytes(d.file("a/trunc.jpg")), nullptr),
                   "trunc.jpg is a corrupt or truncated JPEG", "Premature end");
  EXPECT_ERROR_HAS(decode_image("garbage.jpg", file_bytes(d.file("a/garbage.jpg")), nullptr),
                   "garbage.jpg is a corrupt or truncated JPEG");
  EXPECT_ERROR_HAS(decode_image("trunc.png", file_bytes(d.file("a/trunc.png")), nullptr),
                   "trunc.png is a corrupt");
  EXPECT_ERROR_HAS(decode_image("text.jpg", file_bytes(d.file("a/text.jpg")), nullptr),
                   "text.jpg is neither a JPEG nor a PNG", "47 49 46 38");
  EXPECT_ERROR_HAS(ImageFolder(d.file("nothing")), "is not a directory");
}

TEST(ImageFolder, LoaderSkipsCorruptImagesWithAWarning) {
  TempDir d;
  const auto px = split_image(32, 32, {1, 2, 3}, {4, 5, 6});
  write_jpeg(d.file("a/1.jpg"), 32, 32, px);
  write_bytes(d.file("a/2.jpg"), {0xFF, 0xD8, 0xFF, 0xE0, 0, 16});
  write_jpeg(d.file("b/3.jpg"), 32, 32, px);
  auto ds = std::make_shared<ImageFolder>(d.str(), plain(8));
  DataLoaderOptions lo;
  lo.batch_size = 3;
  lo.num_workers = 2;
  DataLoader strict(ds, lo);
  strict.start_epoch(0);
  EXPECT_ERROR_HAS(strict.next(), "2.jpg is a corrupt or truncated JPEG");
  lo.skip_corrupt = true;
  std::vector<std::string> warnings;
  lo.warn = [&](const std::string& w) { warnings.push_back(w); };
  DataLoader l(ds, lo);
  l.start_epoch(0);
  auto b = l.next();
  ASSERT_TRUE(b);
  EXPECT_EQ((*b)[1].to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("skipping sample 1: [data.image]"), std::string::npos) << warnings[0];
}

TEST(ImageFolder, CenterCropTakesTheMiddle) {
  TempDir d;
  // 64x32: red for x < 32, blue after; resize the shorter side to 16 and crop 16x16 from the
  // middle, i.e. x in [16, 48) of the file: half red, half blue.
  write_png(d.file("a/x.png"), 64, 32, split_image(64, 32, {255, 0, 0}, {0, 0, 255}));
  ImageTransformOptions o = plain(16);
  o.crop = ImageTransformOptions::Crop::center;
  o.resize_shorter = 16;
  ImageFolder ds(d.str(), o);
  std::vector<float> img(3 * 256);
  int64_t label = 0;
  SampleRng rng(0);
  ds.read(0, {img.data(), &label}, rng);
  EXPECT_FLOAT_EQ(img[5 * 16 + 2], 1.0f);             // red channel, left
  EXPECT_FLOAT_EQ(img[2 * 256 + 5 * 16 + 13], 1.0f);  // blue channel, right
  EXPECT_FLOAT_EQ(img[5 * 16 + 13], 0.0f);
}

TEST(ImageFolder, HugeClaimedSizeIsRefused) {
  TempDir d;
  write_jpeg(d.file("a/x.jpg"), 16, 16, split_image(16, 16, {1, 2, 3}, {4, 5, 6}));
  auto b = file_bytes(d.file("a/x.jpg"));
  bool patched = false;
  for (size_t i = 2; i + 8 < b.size() && !patched; ++i) {
    if (b[i] == 0xFF && b[i + 1] == 0xC0) {  // SOF0: length, precision, height, width
      b[i + 5] = b[i + 7] = 0xFF;            // 65280 x 65280 (libjpeg's limit is 65500)
      b[i + 6] = b[i + 8] = 0x00;
      patched = true;
    }
  }
  ASSERT_TRUE(patched);
  EXPECT_ERROR_HAS(decode_image("huge.jpg", b, nullptr), "huge.jpg is a corrupt",
                   "65280x65280 pixels is more than the 2^28 allowed");
}
