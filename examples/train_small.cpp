// Trains a small CNN on a synthetic, separable task it generates (is the bright stripe on the
// left or on the right of an 8x8 noise image?), with eager autograd, SGD with momentum and a
// cosine learning-rate schedule; prints a progress line per epoch.
//
//   ./build/train_small [epochs]
#include <cstdio>
#include <cstdlib>

#include "examples/small_cnn.h"
#include "lathe/core/grad_mode.h"
#include "lathe/core/random.h"
#include "lathe/ops/ops.h"
#include "lathe/optim/lr_scheduler.h"
#include "lathe/optim/optimizer.h"

using namespace lathe;

namespace {

struct Batch {
  Tensor images;  // [n, 1, 8, 8]
  Tensor labels;  // [n] i64
};

// Noise images; class 0 has a brighter left half, class 1 a brighter right half.
Batch make_data(int64_t n, uint64_t seed) {
  Generator gen(seed);
  Tensor images = mul(randn({n, 1, 8, 8}, DType::f32, &gen), 0.8);
  std::vector<int64_t> labels(n);
  Tensor shift = zeros({n, 1, 8, 8});
  float* s = shift.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    labels[i] = gen.randint(0, 2);
    for (int64_t r = 0; r < 8; ++r)
      for (int64_t c = 0; c < 4; ++c) s[i * 64 + r * 8 + c + (labels[i] ? 4 : 0)] = 0.7f;
  }
  return {add(images, shift), from_vector<int64_t>(labels, {n})};
}

double accuracy(nn::Module& model, const Batch& data) {
  NoGradGuard no_grad;
  model.eval();
  Tensor predicted = argmax(model.forward(data.images), 1);
  model.train();
  return mean(eq(predicted, data.labels).to(DType::f64)).item();
}

}  // namespace

int main(int argc, char** argv) {
  const int epochs = argc > 1 ? std::atoi(argv[1]) : 8;
  const int64_t batch = 32;
  manual_seed(0);
  auto model = examples::small_cnn();
  for (Tensor& p : model->parameters()) p.set_requires_grad(true);
  const Batch train = make_data(512, 1), test = make_data(256, 2);

  optim::SGDOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  o.weight_decay = 1e-4;
  optim::SGD opt(model->parameters(), o);
  optim::CosineAnnealingLR schedule(opt, epochs);

  const int64_t n = train.images.size(0).expect_int();
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    double total = 0;
    int steps = 0;
    for (int64_t start = 0; start + batch <= n; start += batch) {
      Tensor x = train.images.narrow(0, start, batch);
      Tensor y = train.labels.narrow(0, start, batch);
      opt.zero_grad();
      Tensor loss = cross_entropy(model->forward(x), y);
      loss.backward();
      opt.step();
      total += loss.item();
      ++steps;
    }
    const double lr = opt.lr();
    schedule.step();
    std::printf("epoch %d/%d  loss %.4f  train accuracy %.3f  test accuracy %.3f  lr %.4f\n", epoch,
                epochs, total / steps, accuracy(*model, train), accuracy(*model, test), lr);
  }
  return 0;
}
