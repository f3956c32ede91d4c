// Trains a resnet18 on an image folder (root/<class>/<image>.jpg|png) with the compiled training
// step, fed by lathe::data's DataLoader: JPEG/PNG decode, random-resized-crop, flip, normalize,
// worker threads prefetching ahead of the step. Prints the loader's progress and an epoch line.
//
//   ./build/train_image_folder FOLDER [--epochs 1] [--size 224] [--batch 32] [--workers 2]
//
// Make a folder of synthetic JPEGs with ./build/lathe-data-bench --generate N --folder FOLDER.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "lathe/core/random.h"
#include "lathe/data/data_loader.h"
#include "lathe/data/image_folder.h"
#include "lathe/models/resnet.h"
#include "lathe/ops/ops.h"
#include "lathe/optim/optimizer.h"
#include "lathe/trace/compile.h"

using namespace lathe;

int main(int argc, char** argv) {
  if (argc < 2 || argc % 2 != 0) {
    std::fprintf(stderr, "usage: %s FOLDER [--epochs 1] [--size 224] [--batch 32] [--workers 2]\n",
                 argv[0]);
    return 2;
  }
  const std::string folder = argv[1];
  int epochs = 1, size = 224, batch = 32, workers = 2;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (k == "--epochs")
      epochs = v;
    else if (k == "--size")
      size = v;
    else if (k == "--batch")
      batch = v;
    else if (k == "--workers")
      workers = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  try {
    data::ImageTransformOptions t;
    t.width = t.height = size;
    auto ds = std::make_shared<data::ImageFolder>(folder, t);
    data::DataLoaderOptions o;
    o.batch_size = batch;
    o.num_workers = workers;
    o.shuffle = true;
    o.drop_last = true;  // one batch shape: one trace
    o.skip_corrupt = true;
    o.progress_every = 10;
    o.on_progress = [](const data::LoaderProgress& p) {
      std::printf("  %s\n", p.format().c_str());
      std::fflush(stdout);
    };
    data::DataLoader loader(ds, o);
    std::printf("%lld images, %zu classes, %lld batches of %d per epoch\n",
                static_cast<long long>(ds->size()), ds->classes().size(),
                static_cast<long long>(loader.num_batches()), batch);
    if (loader.num_batches() == 0) {
      std::fprintf(stderr, "fewer images than one batch of %d\n", batch);
      return 1;
    }

    manual_seed(0);
    auto model = models::resnet18(static_cast<int64_t>(ds->classes().size()));
    model->train();
    for (Tensor& p : model->parameters()) p.set_requires_grad(true);
    optim::SGDOptions so;
    so.lr = 0.01;
    so.momentum = 0.9;
    optim::SGD opt(model->parameters(), so);
    nn::Module* m = model.get();
    CompileOptions co;
    co.name = "resnet18_train_step";
    CompiledFunction loss_of = compile(
        [m](const std::vector<Tensor>& a) { return cross_entropy(m->forward(a[0]), a[1]); }, co);

    for (int epoch = 1; epoch <= epochs; ++epoch) {
      const auto t0 = std::chrono::steady_clock::now();
      double total = 0;
      int steps = 0;
      loader.start_epoch(static_cast<uint64_t>(epoch - 1));
      while (auto b = loader.next()) {
        opt.zero_grad();
        Tensor loss = loss_of({(*b)[0].to_channels_last(), (*b)[1]})[0];
        loss.backward();
        opt.step();
        total += loss.item();
        ++steps;
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("epoch %d/%d  loss %.4f  %.1f images/s  %.2f s (%lld compile)\n", epoch, epochs,
                  total / steps, steps * batch / s, s,
                  static_cast<long long>(loss_of.stats().compiles));
      std::fflush(stdout);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
