// Training on the lazy device: backward through a model whose parameters live on the device
// records the vjps there (the engine's ones / zeros, the loss's class indices and the dropout
// mask are made on the device), so gradients, the SGD and Adam updates and BatchNorm's running
// statistics equal eager; a step is one sync, and the second step on hits the executable cache.
#include <gtest/gtest.h>

#include <cmath>

#include "lathe/core/random.h"
#include "lathe/lazy/lazy.h"
#include "lathe/nn/layers.h"
#include "lathe/ops/autograd.h"
#include "lathe/ops/ops.h"
#include "lathe/optim/optimizer.h"

using namespace lathe;

namespace {

std::shared_ptr<nn::Sequential> small_net(uint64_t seed) {
  manual_seed(seed);
  auto net = nn::make<nn::Sequential>();
  // No bias before the BatchNorm (as real networks have it): training-mode batch norm removes
  // the channel mean, so that bias's gradient is zero up to rounding, and Adam, which divides a
  // gradient by its own size, turns rounding noise into steps of +-lr that no layout matches.
  net->push_back(nn::make<nn::Conv2d>(3, 8, 3, 1, 1, 1, false));
  net->push_back(nn::make<nn::BatchNorm2d>(8));
  net->push_back(nn::make<nn::ReLU>());
  net->push_back(nn::make<nn::Conv2d>(8, 8, 3, 2, 1, 8));  // depthwise, stride 2
  net->push_back(nn::make<nn::Flatten>());
  net->push_back(nn::make<nn::Linear>(8 * 4 * 4, 5));
  return net;
}

std::vector<Tensor> params_of(nn::Module& m) {
  std::vector<Tensor> ps;
  for (auto& [n, p] : m.named_parameters()) ps.push_back(p.set_requires_grad(true));
  return ps;
}

double max_diff(const Tensor& a, const Tensor& b) {
  auto x = a.to(Device::cpu()).to_vector<double>(), y = b.to(Device::cpu()).to_vector<double>();
  EXPECT_EQ(x.size(), y.size());
  double m = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

// Three steps of `make_opt` on the same net eagerly and on the lazy device; every parameter,
// gradient and BatchNorm buffer agrees.
// `same_graph_each_step`: SGD's step is the same graph every step (cache hits from the second
// on); Adam's bias corrections are numbers that change every step (as in PyTorch's default,
// non-capturable Adam), so each of its steps is a new graph.
template <class MakeOpt>
void train_both(MakeOpt make_opt, bool same_graph_each_step) {
  auto eager = small_net(7), lazy = small_net(7);
  eager->train();
  lazy->train();
  lazy->to(Device::lazy());
  auto pe = params_of(*eager), pl = params_of(*lazy);
  for (const Tensor& p : pl) ASSERT_EQ(p.device(), Device::lazy());
  auto oe = make_opt(pe), ol = make_opt(pl);
  Generator gen(3);
  Tensor x = randn({4, 3, 8, 8}, DType::f32, &gen);
  Tensor y = randint(0, 5, {4}, DType::i64, &gen);
  Tensor xl = x.to(Device::lazy()), yl = y.to(Device::lazy());
  lazy::reset_metrics();
  for (int step = 0; step < 3; ++step) {
    oe->zero_grad();
    Tensor le = cross_entropy(eager->forward(x), y);
    le.backward();
    oe->step();
    ol->zero_grad();
    Tensor ll = cross_entropy(lazy->forward(xl), yl);
    EXPECT_EQ(ll.device(), Device::lazy());
    ll.backward();
    ol->step();
    lathe::sync();
    EXPECT_LT(max_diff(ll, le), 1e-5) << "loss, step " << step;
  }
  for (size_t i = 0; i < pe.size(); ++i) {
    ASSERT_TRUE(pl[i].grad().defined()) << i;
    EXPECT_EQ(pl[i].grad().device(), Device::lazy()) << i;
    EXPECT_LT(max_diff(pl[i].grad(), pe[i].grad()), 1e-4) << "grad " << i;
    EXPECT_LT(max_diff(pl[i], pe[i]), 1e-5) << "parameter " << i;
  }
  auto be = eager->named_buffers(), bl = lazy->named_buffers();
  ASSERT_EQ(be.size(), bl.size());
  for (size_t i = 0; i < be.size(); ++i)
    EXPECT_LT(max_diff(bl[i].second, be[i].second), 1e-5) << bl[i].first;
  const lazy::Metrics m = lazy::metrics();
  if (same_graph_each_step) {  // step 1 (momentum buffers made) and step 2 differ; then hits
    EXPECT_GE(m.cache_hits, 1);
    EXPECT_LE(m.compiles, 2);
  } else {
    EXPECT_EQ(m.compiles, 3);
  }
}

}  // namespace

TEST(LazyTraining, SgdWithMomentumEqualsEager) {
  train_both(
      [](std::vector<Tensor> ps) {
        optim::SGDOptions o;
        o.lr = 0.1;
        o.momentum = 0.9;
        o.weight_decay = 1e-4;
        return std::make_unique<optim::SGD>(std::move(ps), o);
      },
      true);
}

TEST(LazyTraining, AdamEqualsEager) {
  train_both(
      [](std::vector<Tensor> ps) {
        optim::AdamOptions o;
        o.lr = 0.01;
        return std::make_unique<optim::Adam>(std::move(ps), o);
      },
      false);
}

TEST(LazyTraining, DropoutMaskReplaysOnTheDevice) {
  // The dropout vjp redraws the forward's mask from the saved generator position: on the lazy
  // device the redraw is recorded there too, and the gradient is the eager one.
  Generator gen(11);
  Tensor w = randn({6, 6}, DType::f32, &gen);
  Tensor we = w.clone().set_requires_grad(true);
  Tensor wl = w.to(Device::lazy()).set_requires_grad(true);
  manual_seed(5);
  sum(dropout(mul(we, 2.0), 0.5, true)).backward();
  manual_seed(5);
  sum(dropout(mul(wl, 2.0), 0.5, true)).backward();
  EXPECT_EQ(wl.grad().device(), Device::lazy());
  EXPECT_EQ(max_diff(wl.grad(), we.grad()), 0.0);
}

// A value saved for backward and then written in place is caught by the version check on the
// lazy device as eagerly, whether the write has run (a sync between) or is still pending; a sync
// between forward and backward without a write raises nothing.
TEST(LazyTraining, InPlaceWriteOfASavedValueIsAnError) {
  for (bool sync_between : {false, true}) {
    Generator gen(2);
    Tensor x = randn({4}, DType::f32, &gen).to(Device::lazy()).set_requires_grad(true);
    Tensor w = randn({4}, DType::f32, &gen).to(Device::lazy());
    Tensor z = mul(x, w);
    mul_(w, 3.0);
    if (sync_between) lathe::sync();
    try {
      sum(z).backward();
      ADD_FAILURE() << "no error, sync_between " << sync_between;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("modified by an inplace operation"), std::string::npos)
          << e.what();
    }
  }
  Generator gen(3);
  Tensor x = randn({4}, DType::f32, &gen).to(Device::lazy()).set_requires_grad(true);
  Tensor w = randn({4}, DType::f32, &gen).to(Device::lazy());
  Tensor loss = sum(mul(x, w));
  (void)loss.to(Device::cpu());  // reading the loss syncs: no write, no error
  loss.backward();
  EXPECT_EQ(max_diff(x.grad(), w), 0.0);
}
