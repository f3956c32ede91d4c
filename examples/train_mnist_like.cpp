// Trains a small CNN on MNIST-like data with a compiled training step: lathe::compile traces
// forward + loss once (AOT autograd builds and compiles the backward too), loss.backward() runs
// the compiled backward into the parameters' .grad, and AdamW with a cosine schedule updates
// them. Prints a progress line per epoch.
//
//   ./build/train_mnist_like [epochs] [--eager] [FOLDER]
//   ./build/train_mnist_like --write-idx FOLDER
//
// With FOLDER (holding MNIST's train-/t10k- idx files, plain or .gz) it trains on them through
// lathe::data's DataLoader (shuffled, two worker threads); without, on digits it generates
// (16x16 seven-segment strokes, randomly shifted, dimmed and noised). --write-idx writes those
// generated digits as gzipped idx files into FOLDER (a stand-in for MNIST in tests).
// --eager runs the same step without compiling (for comparison).
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "examples/digits.h"
#include "lathe/core/grad_mode.h"
#include "lathe/core/random.h"
#include "lathe/data/data_loader.h"
#include "lathe/data/mnist.h"
#include "lathe/nn/layers.h"
#include "lathe/ops/ops.h"
#include "lathe/optim/lr_scheduler.h"
#include "lathe/optim/optimizer.h"
#include "lathe/trace/compile.h"

using namespace lathe;
using namespace lathe::examples::digits;

namespace {

// Writes the generated digits in the idx format, gzipped.
void write_idx(const std::string& folder, const std::string& stem, const Dataset& d) {
  const auto n = static_cast<uint32_t>(d.images.size(0).expect_int());
  auto write = [&](const std::string& name, const std::vector<uint32_t>& dims,
                   const std::vector<uint8_t>& data) {
    std::vector<uint8_t> b{0, 0, 0x08, static_cast<uint8_t>(dims.size())};
    for (uint32_t v : dims)
      for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
    b.insert(b.end(), data.begin(), data.end());
    gzFile f = gzopen((folder + "/" + name).c_str(), "wb");
    gzwrite(f, b.data(), static_cast<unsigned>(b.size()));
    gzclose(f);
  };
  std::vector<uint8_t> pixels, labels;
  for (float v : d.images.to_vector<float>())
    pixels.push_back(static_cast<uint8_t>(std::clamp(v, 0.0f, 1.0f) * 255.0f + 0.5f));
  for (int64_t v : d.labels.to_vector<int64_t>()) labels.push_back(static_cast<uint8_t>(v));
  const auto side = static_cast<uint32_t>(kSize);
  write(stem + "-images-idx3-ubyte.gz", {n, side, side}, pixels);
  write(stem + "-labels-idx1-ubyte.gz", {n}, labels);
}

// Accuracy over a loader's epoch (evaluation mode, no gradients).
double loader_accuracy(nn::Module& model, data::DataLoader& loader) {
  NoGradGuard no_grad;
  model.eval();
  loader.start_epoch(0);
  double correct = 0, total = 0;
  while (auto b = loader.next()) {
    Tensor predicted = argmax(model.forward((*b)[0]), 1);
    correct += sum(eq(predicted, (*b)[1]).to(DType::f64)).item();
    total += static_cast<double>((*b)[1].size(0).expect_int());
  }
  model.train();
  return total > 0 ? correct / total : 0.0;
}

}  // namespace

int main(int argc, char** argv) {
  // A folder argument (or --write-idx FOLDER) is taken out before the digits' own parsing.
  std::vector<char*> rest{argv[0]};
  std::string folder, write_to;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--write-idx" && i + 1 < argc) {
      write_to = argv[++i];
    } else if (std::filesystem::is_directory(a)) {
      folder = a;
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (!write_to.empty()) {
    std::filesystem::create_directories(write_to);
    write_idx(write_to, "train", make_dataset(4096, 1));
    write_idx(write_to, "t10k", make_dataset(1024, 2));
    std::printf("wrote idx files to %s\n", write_to.c_str());
    return 0;
  }
  Args args{6};
  if (!parse_args(static_cast<int>(rest.size()), rest.data(), "train_mnist_like", &args)) return 2;
  const int epochs = args.epochs;
  const bool eager = args.eager;
  const int64_t batch = 64;
  manual_seed(0);

  // Real files: MNIST's usual normalization; the loaders batch them (drop_last keeps one shape,
  // so one trace serves every step).
  std::shared_ptr<data::MnistDataset> train_files, test_files;
  int64_t side = kSize;
  if (!folder.empty()) {
    try {
      data::MnistOptions mo;
      train_files =
          std::make_shared<data::MnistDataset>(data::MnistDataset::from_folder(folder, true, mo));
      test_files =
          std::make_shared<data::MnistDataset>(data::MnistDataset::from_folder(folder, false, mo));
    } catch (const Error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 1;
    }
    side = train_files->fields()[0].shape[1];
  }
  auto model = make_model(side);
  model->train();
  for (Tensor& p : model->parameters()) p.set_requires_grad(true);
  Dataset train, test;
  if (folder.empty()) train = make_dataset(4096, 1), test = make_dataset(1024, 2);
  data::DataLoaderOptions lo;
  lo.batch_size = batch;
  lo.num_workers = 2;
  lo.shuffle = true;
  lo.drop_last = true;
  lo.seed = 0;
  data::DataLoaderOptions eval_o;
  eval_o.batch_size = 1000;
  eval_o.num_workers = 2;
  std::unique_ptr<data::DataLoader> train_loader, eval_train, eval_test;
  if (train_files) {
    train_loader = std::make_unique<data::DataLoader>(train_files, lo);
    eval_train = std::make_unique<data::DataLoader>(train_files, eval_o);
    eval_test = std::make_unique<data::DataLoader>(test_files, eval_o);
  }

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

  for (int epoch = 1; epoch <= epochs; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    double total = 0;
    int steps = 0;
    auto step = [&](const Tensor& x, const Tensor& y) {
      opt.zero_grad();
      Tensor loss = eager ? cross_entropy(model->forward(x), y) : loss_of({x, y})[0];
      loss.backward();
      opt.step();
      total += loss.item();
      ++steps;
    };
    if (train_loader) {
      train_loader->start_epoch(static_cast<uint64_t>(epoch - 1));
      while (auto b = train_loader->next()) step((*b)[0], (*b)[1]);
    } else {
      const int64_t n = train.images.size(0).expect_int();
      for (int64_t start = 0; start + batch <= n; start += batch)
        step(train.images.narrow(0, start, batch).contiguous(),
             train.labels.narrow(0, start, batch).contiguous());
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double lr = opt.lr();
    schedule.step();
    const double train_acc =
        train_loader ? loader_accuracy(*model, *eval_train) : accuracy(*model, train);
    const double test_acc =
        train_loader ? loader_accuracy(*model, *eval_test) : accuracy(*model, test);
    std::printf(
        "epoch %d/%d  loss %.4f  train accuracy %.3f  test accuracy %.3f  lr %.5f  %.2f s "
        "(%lld compile)\n",
        epoch, epochs, total / steps, train_acc, test_acc, lr, seconds,
        static_cast<long long>(loss_of.stats().compiles));
    std::fflush(stdout);
  }
  return 0;
}
