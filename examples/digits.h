// The synthetic digits task of examples/train_mnist_like.cpp and examples/train_ddp.cpp: 16x16
// images of the digits 0-9 drawn as seven-segment strokes, randomly shifted, dimmed and noised,
// and the small CNN that learns them.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "lathe/core/grad_mode.h"
#include "lathe/core/random.h"
#include "lathe/nn/layers.h"
#include "lathe/ops/ops.h"

namespace lathe::examples::digits {

constexpr int64_t kSize = 16;
constexpr int64_t kClasses = 10;

struct Dataset {
  Tensor images;  // [n, 1, 16, 16] f32
  Tensor labels;  // [n] i64
};

// Which of the seven segments (a top, b top right, c bottom right, d bottom, e bottom left,
// f top left, g middle) each digit lights.
constexpr const char* kSegments[kClasses] = {"abcdef", "bc",     "abdeg", "abcdg",   "bcfg",
                                             "acdfg",  "acdefg", "abc",   "abcdefg", "abcdfg"};

// Draws `digit` into a 16x16 image: a 6x10 seven-segment glyph at offset (dy, dx), at brightness
// `ink`.
inline void draw_digit(float* img, int digit, int64_t dy, int64_t dx, float ink) {
  auto hline = [&](int64_t r, int64_t c0) {
    for (int64_t c = c0; c < c0 + 6; ++c) img[(r + dy) * kSize + c + dx] = ink;
  };
  auto vline = [&](int64_t r0, int64_t c) {
    for (int64_t r = r0; r < r0 + 5; ++r) img[(r + dy) * kSize + c + dx] = ink;
  };
  for (const char* s = kSegments[digit]; *s; ++s) {
    switch (*s) {
      case 'a':
        hline(0, 0);
        break;
      case 'b':
        vline(0, 5);
        break;
      case 'c':
        vline(5, 5);
        break;
      case 'd':
        hline(9, 0);
        break;
      case 'e':
        vline(5, 0);
        break;
      case 'f':
        vline(0, 0);
        break;
      case 'g':
        hline(5, 0);
        break;
    }
  }
}

inline Dataset make_dataset(int64_t n, uint64_t seed) {
  Generator gen(seed);
  std::vector<float> pixels(n * kSize * kSize, 0.0f);
  std::vector<int64_t> labels(n);
  for (int64_t i = 0; i < n; ++i) {
    labels[i] = gen.randint(0, kClasses);
    // The glyph is 6 wide and 10 tall: anywhere inside the image, with a border of 1.
    const int64_t dy = gen.randint(1, kSize - 10), dx = gen.randint(1, kSize - 6);
    draw_digit(&pixels[i * kSize * kSize], static_cast<int>(labels[i]), dy, dx,
               static_cast<float>(gen.uniform(0.5, 1.0)));
  }
  Tensor clean = from_vector<float>(pixels, {n, 1, kSize, kSize});
  Tensor noise = mul(randn({n, 1, kSize, kSize}, DType::f32, &gen), 0.35);
  return {add(clean, noise), from_vector<int64_t>(labels, {n})};
}

// [N, 1, size, size] -> [N, 10] logits (size 16 for the generated digits, 28 for MNIST).
inline std::shared_ptr<nn::Sequential> make_model(int64_t size = kSize) {
  auto m = nn::make<nn::Sequential>();
  m->push_back(nn::make<nn::Conv2d>(1, 16, 3, 1, 1));
  m->push_back(nn::make<nn::BatchNorm2d>(16));
  m->push_back(nn::make<nn::ReLU>());
  m->push_back(nn::make<nn::MaxPool2d>(2));  // 8x8
  m->push_back(nn::make<nn::Conv2d>(16, 32, 3, 1, 1));
  m->push_back(nn::make<nn::BatchNorm2d>(32));
  m->push_back(nn::make<nn::ReLU>());
  m->push_back(nn::make<nn::MaxPool2d>(2));  // 4x4
  m->push_back(nn::make<nn::Flatten>(1));
  m->push_back(nn::make<nn::Linear>(32 * (size / 4) * (size / 4), kClasses));
  return m;
}

inline double accuracy(nn::Module& model, const Dataset& data) {
  NoGradGuard no_grad;
  model.eval();
  Tensor predicted = argmax(model.forward(data.images), 1);
  model.train();
  return mean(eq(predicted, data.labels).to(DType::f64)).item();
}

// The examples' command line, "[epochs] [--eager]": false (after printing the usage) when it
// does not parse.
struct Args {
  int epochs;
  bool eager = false;
};
inline bool parse_args(int argc, char** argv, const char* program, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--eager") {
      a->eager = true;
    } else if ((a->epochs = std::atoi(argv[i])) < 1) {
      std::fprintf(stderr, "usage: %s [epochs >= 1] [--eager]\n", program);
      return false;
    }
  }
  return true;
}

}  // namespace lathe::examples::digits
