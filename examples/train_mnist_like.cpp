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

#include "examples/digits.h"
#include "lathe/core/grad_mode.h"
#include "lathe/core/random.h"
#include "lathe/nn/layers.h"
#include "lathe/ops/ops.h"
#include "lathe/optim/lr_scheduler.h"
#include "lathe/optim/optimizer.h"
#include "lathe/trace/compile.h"

using namespace lathe;
using namespace lathe::examples::digits;

int main(int argc, char** argv) {
  Args args{6};
  if (!parse_args(argc, argv, "train_mnist_like", &args)) return 2;
  const int epochs = args.epochs;
  const bool eager = args.eager;
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
