// Images per second of the image-folder pipeline: decode JPEG, random-resized-crop to 224,
// flip, normalize, batches of 32, at 1 and 2 worker threads (compare with
// bench/peer_torchvision_loader.py on the same folder; docs/data.md).
//
//   ./build/lathe-data-bench --generate 1000 --folder /tmp/jpegs   # writes N JPEGs, then runs
//   ./build/lathe-data-bench --folder /tmp/jpegs [--workers 1,2] [--epochs 2] [--batch 32]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>
// libjpeg's header needs FILE and size_t declared first.
#include <jpeglib.h>

#include "lathe/data/data_loader.h"
#include "lathe/data/image_folder.h"

using namespace lathe;

namespace {

// A JPEG of an ImageNet-like size (about 500x375, varying) with smooth gradients and texture.
bool write_jpeg(const std::string& path, int w, int h, uint64_t seed) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  std::vector<uint8_t> row(static_cast<size_t>(w) * 3);
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, f);
  c.image_width = static_cast<JDIMENSION>(w);
  c.image_height = static_cast<JDIMENSION>(h);
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 90, TRUE);
  jpeg_start_compress(&c, TRUE);
  data::SampleRng rng(seed);
  const int a = static_cast<int>(rng.below(256)), b = static_cast<int>(rng.below(256));
  while (c.next_scanline < c.image_height) {
    const int y = static_cast<int>(c.next_scanline);
    for (int x = 0; x < w; ++x) {
      const int noise = static_cast<int>(rng.below(32));
      row[static_cast<size_t>(x) * 3 + 0] = static_cast<uint8_t>((a + x * 255 / w + noise) & 255);
      row[static_cast<size_t>(x) * 3 + 1] = static_cast<uint8_t>((b + y * 255 / h + noise) & 255);
      row[static_cast<size_t>(x) * 3 + 2] = static_cast<uint8_t>(((x ^ y) + noise) & 255);
    }
    JSAMPROW p = row.data();
    jpeg_write_scanlines(&c, &p, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::fclose(f);
  return true;
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> v;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) v.push_back(std::atoi(item.c_str()));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::string folder;
  int generate = 0, epochs = 2, batch = 32;
  std::vector<int> workers{1, 2};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--folder")
      folder = v;
    else if (k == "--generate")
      generate = std::atoi(v.c_str());
    else if (k == "--workers")
      workers = parse_list(v);
    else if (k == "--epochs")
      epochs = std::atoi(v.c_str());
    else if (k == "--batch")
      batch = std::atoi(v.c_str());
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (folder.empty() || (argc % 2) == 0) {
    std::fprintf(stderr,
                 "usage: lathe-data-bench --folder DIR [--generate N] [--workers 1,2] "
                 "[--epochs 2] [--batch 32]\n");
    return 2;
  }
  if (generate > 0) {
    data::SampleRng sizes(7);
    for (int i = 0; i < generate; ++i) {
      const std::string dir = folder + "/class" + std::to_string(i % 10);
      std::filesystem::create_directories(dir);
      const int w = 400 + static_cast<int>(sizes.below(200)),
                h = 300 + static_cast<int>(sizes.below(150));
      if (!write_jpeg(dir + "/" + std::to_string(i) + ".jpg", w, h, static_cast<uint64_t>(i))) {
        std::fprintf(stderr, "cannot write into %s\n", dir.c_str());
        return 1;
      }
    }
    std::printf("wrote %d JPEGs to %s\n", generate, folder.c_str());
  }
  try {
    auto ds = std::make_shared<data::ImageFolder>(folder);  // random-resized-crop 224, flip
    std::printf("%lld images, batch %d, %d epochs per worker count\n",
                static_cast<long long>(ds->size()), batch, epochs);
    for (int w : workers) {
      data::DataLoaderOptions o;
      o.batch_size = batch;
      o.num_workers = w;
      o.shuffle = true;
      data::DataLoader loader(ds, o);
      int64_t images = 0;
      const auto t0 = std::chrono::steady_clock::now();
      for (int e = 0; e < epochs; ++e) {
        loader.start_epoch(static_cast<uint64_t>(e));
        while (auto b = loader.next()) images += (*b)[0].size(0).expect_int();
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("workers %d  %lld images  %.2f s  %.1f images/s\n", w,
                  static_cast<long long>(images), s, images / s);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
