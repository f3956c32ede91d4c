// Trains a small CNN on an MNIST-like task it generates (16x16 images of the digits 0-9 drawn as
// seven-segment strokes, randomly shifted, dimmed and noised) with a compiled training step:
// lathe::compile traces forward + loss once (AOT autograd builds and compiles the backward too),
// loss.backward() runs the compiled backward into the parameters' .grad, and AdamW with a cosine
// schedule updates them. Prints a progress line per epoch.
//
//   ./build/train_mnist_like [epochs] [--eager]
//
// --eager runs the same step without compiling (for comparison).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "lathe/core/grad_mode.h"
#include "lathe/core/random.h"
#include "lathe/nn/layers.h"
#include "lathe/ops/ops.h"
#include "lathe/optim/lr_scheduler.h"
#include "lathe/optim/optimizer.h"
#include "lathe/trace/compile.h"

using namespace lathe;

namespace {

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
void draw_digit(float* img, int digit, int64_t dy, int64_t dx, float ink) {
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

Dataset make_dataset(int64_t n, uint64_t seed) {
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

// [N, 1, 16, 16] -> [N, 10] logits.
std::shared_ptr<nn::Sequential> make_model() {
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
  m->push_back(nn::make<nn::Linear>(32 * 4 * 4, kClasses));
  return m;
}

double accuracy(nn::Module& model, const Dataset& data) {
  NoGradGuard no_grad;
  model.eval();
  Tensor predicted = argmax(model.forward(data.images), 1);
  model.train();
  return mean(eq(predicted, data.labels).to(DType::f64)).item();
}

}  // namespace

int main(int argc, char** argv) {
  int epochs = 6;
  bool eager = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--eager") {
      eager = true;
    } else {
      epochs = std::atoi(argv[i]);
      if (epochs < 1) {
        std::fprintf(stderr, "usage: train_mnist_like [epochs >= 1] [--eager]\n");
        return 2;
      }
    }
  }
  const int64_t batch = 64;
  manual_seed(0);
  auto model = make_model();
  model->train();
  for (Tensor& p : model->parameters()) p.set_requires_grad(true);
  const Dataset train = make_dataset(4096, 1), test = make_dataset(1024, 2);

  optim::AdamOptions o;
  o.lr = 1e-2;
  o.weight_decay = 1e-4;
  optim::AdamW opt(model->parameters(), o);
  optim::CosineAnnealingLR schedule(opt, epochs);

  // The compiled training step's forward and loss. The model is captured: its parameters become
  // graph inputs read in place (the optimizer's updates are seen by the next call), its
  // BatchNorm running statistics are updated in place as in eager.
  nn::Module* m = model.get();
  CompileOptions co;
  co.name = "train_step";
  CompiledFunction loss_of = compile(
      [m](const std::vector<Tensor>& a) { return cross_entropy(m->forward(a[0]), a[1]); }, co);

  const int64_t n = train.images.size(0).expect_int();
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    double total = 0;
    int steps = 0;
    for (int64_t start = 0; start + batch <= n; start += batch) {
      Tensor x = train.images.narrow(0, start, batch).contiguous();
      Tensor y = train.labels.narrow(0, start, batch).contiguous();
      opt.zero_grad();
      Tensor loss = eager ? cross_entropy(model->forward(x), y) : loss_of({x, y})[0];
      loss.backward();
      opt.step();
      total += loss.item();
      ++steps;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double lr = opt.lr();
    schedule.step();
    std::printf(
        "epoch %d/%d  loss %.4f  train accuracy %.3f  test accuracy %.3f  lr %.5f  %.2f s "
        "(%lld compile)\n",
        epoch, epochs, total / steps, accuracy(*model, train), accuracy(*model, test), lr, seconds,
        static_cast<long long>(loss_of.stats().compiles));
    std::fflush(stdout);
  }
  return 0;
}
