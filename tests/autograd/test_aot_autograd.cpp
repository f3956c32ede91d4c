// AOT autograd: lathe::compile called with grad enabled on modules whose parameters require grad
// gives the losses, parameter gradients and BatchNorm statistics of eager training, step after
// step with SGD updating the parameters in place between calls.
#include <gtest/gtest.h>

#include <cmath>

#include "lathe/core/grad_mode.h"
#include "lathe/core/random.h"
#include "lathe/nn/layers.h"
#include "lathe/nn/module.h"
#include "lathe/ops/ops.h"
#include "lathe/optim/optimizer.h"
#include "lathe/trace/compile.h"

using namespace lathe;
using V = std::vector<Tensor>;

namespace {

std::shared_ptr<nn::Sequential> mlp() {
  auto m = nn::make<nn::Sequential>();
  m->push_back(nn::make<nn::Linear>(8, 16));
  m->push_back(nn::make<nn::GELU>());
  m->push_back(nn::make<nn::Linear>(16, 16));
  m->push_back(nn::make<nn::Tanh>());
  m->push_back(nn::make<nn::Linear>(16, 4));
  return m;
}

std::shared_ptr<nn::Sequential> cnn() {
  auto m = nn::make<nn::Sequential>();
  m->push_back(nn::make<nn::Conv2d>(3, 6, 3, 1, 1));
  m->push_back(nn::make<nn::BatchNorm2d>(6));
  m->push_back(nn::make<nn::ReLU>());
  m->push_back(nn::make<nn::MaxPool2d>(2));
  m->push_back(nn::make<nn::Conv2d>(6, 8, 3, 1, 1));
  m->push_back(nn::make<nn::BatchNorm2d>(8));
  m->push_back(nn::make<nn::ReLU>());
  m->push_back(nn::make<nn::AdaptiveAvgPool2d>(std::vector<int64_t>{1, 1}));
  m->push_back(nn::make<nn::Flatten>(1));
  m->push_back(nn::make<nn::Linear>(8, 5));
  return m;
}

using Factory = std::shared_ptr<nn::Sequential> (*)();

// Two copies of the same initial model, in `dt`, in train mode, parameters requiring grad.
std::pair<std::shared_ptr<nn::Sequential>, std::shared_ptr<nn::Sequential>> twins(Factory f,
                                                                                  DType dt) {
  manual_seed(1234);
  auto a = f();
  auto b = f();
  a->to(dt);
  b->to(dt);
  std::map<std::string, Tensor> sd;
  for (auto& [k, v] : a->state_dict()) sd[k] = v.clone();
  b->load_state_dict(sd);
  for (auto* m : {a.get(), b.get()}) {
    m->train();
    for (Tensor& p : m->parameters()) p.set_requires_grad(true);
  }
  return {a, b};
}

void expect_close(const Tensor& got, const Tensor& want, double rtol, double atol,
                  const std::string& what) {
  ASSERT_TRUE(got.defined()) << what << " is undefined";
  ASSERT_TRUE(want.defined()) << what << " (eager) is undefined";
  ASSERT_EQ(got.shape(), want.shape()) << what;
  auto g = got.to(DType::f64).to_vector<double>();
  auto w = want.to(DType::f64).to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_LE(std::abs(g[i] - w[i]), atol + rtol * std::abs(w[i]))
        << what << " element " << i << ": " << g[i] << " vs " << w[i];
}

struct Batch {
  Tensor x, y;
};

Batch batch(const Shape& x_sizes, int64_t classes, DType dt, uint64_t seed) {
  Generator gen(seed);
  Tensor x = randn(x_sizes, dt, &gen);
  Tensor y = randint(0, classes, {x_sizes[0]}, DType::i64, &gen);
  return {x, y};
}

// Trains `steps` SGD steps on both twins, eagerly and through `compiled_loss`, comparing the
// loss, every parameter's gradient, and after each step every parameter and buffer.
void train_and_compare(const std::shared_ptr<nn::Sequential>& eager,
                       const std::shared_ptr<nn::Sequential>& compiled,
                       const std::function<Tensor(const Batch&)>& eager_loss,
                       const std::function<Tensor(const Batch&)>& compiled_loss,
                       const std::vector<Batch>& batches, double rtol, double atol) {
  optim::SGDOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  optim::SGD opt_e(eager->parameters(), o), opt_c(compiled->parameters(), o);
  const auto names = eager->named_parameters();
  for (size_t s = 0; s < batches.size(); ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    opt_e.zero_grad();
    opt_c.zero_grad();
    Tensor le = eager_loss(batches[s]);
    Tensor lc = compiled_loss(batches[s]);
    ASSERT_TRUE(lc.requires_grad());
    expect_close(lc, le, rtol, atol, "loss");
    le.backward();
    lc.backward();
    const auto pc = compiled->named_parameters();
    for (size_t i = 0; i < names.size(); ++i)
      expect_close(pc[i].second.grad(), names[i].second.grad(), rtol, atol,
                   "grad of " + names[i].first);
    opt_e.step();
    opt_c.step();
    const auto se = eager->state_dict(), sc = compiled->state_dict();
    for (const auto& [k, v] : se)
      if (is_floating(v.dtype())) expect_close(sc.at(k), v, rtol, atol, "state " + k);
  }
}

Tensor loss_of(nn::Module& m, const Batch& b) { return cross_entropy(m.forward(b.x), b.y); }

}  // namespace

// Every test runs on the reference interpreter and on the optimizing "cpu" backend (both the
// forward and the backward graph go through the backend).
class AotAutograd : public ::testing::TestWithParam<std::string> {
 protected:
  CompileOptions options() const {
    CompileOptions o;
    o.backend = GetParam();
    return o;
  }
  // The cross-entropy loss of module m on (x, labels), compiled.
  CompiledFunction compile_loss(nn::Module* m) const {
    return lathe::compile([m](const V& a) { return cross_entropy(m->forward(a[0]), a[1]); },
                          options());
  }
};

INSTANTIATE_TEST_SUITE_P(Backends, AotAutograd, ::testing::Values("interpreter", "cpu"));

TEST_P(AotAutograd, MlpTrainsLikeEagerF64) {
  auto [e, c] = twins(mlp, DType::f64);
  nn::Module* cm = c.get();
  auto f = compile_loss(cm);
  std::vector<Batch> bs;
  for (int s = 0; s < 3; ++s) bs.push_back(batch({6, 8}, 4, DType::f64, 10 + s));
  train_and_compare(
      e, c, [&](const Batch& b) { return loss_of(*e, b); },
      [&](const Batch& b) {
        return f({b.x, b.y})[0];
      },
      bs, 1e-10, 1e-12);
  EXPECT_EQ(f.stats().compiles, 1);
  EXPECT_EQ(f.stats().hits, 2);
  // The partition recomputes gelu / tanh from their inputs instead of saving the results.
  const std::string g = f.graph_string();
  EXPECT_NE(g.find("backward ("), std::string::npos) << g;
  EXPECT_EQ(g.find(" 0 recomputed"), std::string::npos) << g;
}

TEST_P(AotAutograd, CompiledModuleComposesWithEagerLossF32) {
  auto [e, c] = twins(mlp, DType::f32);
  auto f = lathe::compile(std::static_pointer_cast<nn::Module>(c), options());
  std::vector<Batch> bs;
  for (int s = 0; s < 3; ++s) bs.push_back(batch({5, 8}, 4, DType::f32, 20 + s));
  train_and_compare(
      e, c, [&](const Batch& b) { return loss_of(*e, b); },
      [&](const Batch& b) { return cross_entropy(f({b.x})[0], b.y); }, bs, 1e-4, 1e-6);
}

TEST_P(AotAutograd, CnnWithBatchNormTrainsLikeEagerF64) {
  auto [e, c] = twins(cnn, DType::f64);
  nn::Module* cm = c.get();
  auto f = compile_loss(cm);
  std::vector<Batch> bs;
  for (int s = 0; s < 3; ++s) bs.push_back(batch({4, 3, 8, 8}, 5, DType::f64, 30 + s));
  train_and_compare(
      e, c, [&](const Batch& b) { return loss_of(*e, b); },
      [&](const Batch& b) {
        return f({b.x, b.y})[0];
      },
      bs, 1e-9, 1e-11);
  EXPECT_EQ(f.stats().compiles, 1);
}

TEST_P(AotAutograd, CnnF32) {
  auto [e, c] = twins(cnn, DType::f32);
  nn::Module* cm = c.get();
  auto f = compile_loss(cm);
  std::vector<Batch> bs;
  for (int s = 0; s < 2; ++s) bs.push_back(batch({4, 3, 8, 8}, 5, DType::f32, 40 + s));
  train_and_compare(
      e, c, [&](const Batch& b) { return loss_of(*e, b); },
      [&](const Batch& b) {
        return f({b.x, b.y})[0];
      },
      bs, 1e-4, 1e-5);
}

// Eval mode with trainable parameters (fine-tuning with frozen statistics): the cpu backend
// freezes the BatchNorm statistics, the backward reads the same tensors.
TEST_P(AotAutograd, EvalModeCnnGradients) {
  auto [e, c] = twins(cnn, DType::f32);
  for (auto* m : {e.get(), c.get()}) {
    m->eval();
    Generator gm(3);
    for (auto& [name, t] : m->named_buffers())
      if (name.find("running_var") != std::string::npos) gm.fill_uniform(t, 0.5, 2.0);
  }
  auto f = compile_loss(c.get());
  std::vector<Batch> bs;
  for (int s = 0; s < 2; ++s) bs.push_back(batch({3, 3, 8, 8}, 5, DType::f32, 90 + s));
  train_and_compare(
      e, c, [&](const Batch& b) { return loss_of(*e, b); },
      [&](const Batch& b) {
        return f({b.x, b.y})[0];
      },
      bs, 1e-4, 1e-5);
}

TEST_P(AotAutograd, DynamicBatchSize) {
  auto [e, c] = twins(cnn, DType::f64);
  nn::Module* cm = c.get();
  auto f = compile_loss(cm);
  std::vector<Batch> bs;
  const int64_t sizes[] = {4, 6, 3, 7};
  for (int s = 0; s < 4; ++s) bs.push_back(batch({sizes[s], 3, 8, 8}, 5, DType::f64, 50 + s));
  train_and_compare(
      e, c, [&](const Batch& b) { return loss_of(*e, b); },
      [&](const Batch& b) {
        return f({b.x, b.y})[0];
      },
      bs, 1e-9, 1e-11);
  // The second size recompiles with a dynamic batch; later sizes reuse that entry.
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_EQ(f.num_entries(), 2u);
}

TEST_P(AotAutograd, InputGradientAndRetainGraph) {
  manual_seed(5);
  Tensor w = randn({4, 3}, DType::f64);
  w.set_requires_grad(true);
  auto f = lathe::compile([w](const V& a) { return sum(mul(tanh(matmul(a[0], w)), sum(a[0]))); },
                          options());
  Tensor x = randn({2, 4}, DType::f64);
  Tensor xc = x.clone(), xe = x.clone();
  xc.set_requires_grad(true);
  xe.set_requires_grad(true);
  // The argument is a non-leaf: the compiled node's edge leads into the eager graph before it.
  Tensor lc = f({mul(xc, 1.5)})[0];
  lc.backward({}, /*retain_graph=*/true);
  Tensor gw1 = w.grad().clone();
  lc.backward({}, true);  // retained: accumulates a second time
  w.set_grad({});
  Tensor xe2 = mul(xe, 1.5);
  Tensor le = sum(mul(tanh(matmul(xe2, w)), sum(xe2)));
  le.backward({}, true);
  le.backward();
  expect_close(lc, le, 1e-12, 1e-12, "value");
  expect_close(xc.grad(), xe.grad(), 1e-12, 1e-12, "input grad");
  expect_close(mul(gw1, 2.0), w.grad(), 1e-12, 1e-12, "weight grad");
}

TEST_P(AotAutograd, SecondBackwardWithoutRetainGraphIsAClearError) {
  auto [e, c] = twins(mlp, DType::f64);
  nn::Module* cm = c.get();
  auto f = compile_loss(cm);
  Batch b = batch({3, 8}, 4, DType::f64, 60);
  Tensor loss = f({b.x, b.y})[0];
  EXPECT_EQ(loss.grad_fn_name(), "compiled_backward");
  loss.backward();
  try {
    loss.backward();
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("second time"), std::string::npos) << err.what();
  }
}

// Dropout draws from the default generator in the compiled forward exactly as eager does: with
// the same seed, the same masks, losses and gradients (f64: bit for bit up to the reduction order).
TEST_P(AotAutograd, DropoutMatchesEagerWithTheSameSeed) {
  auto make = [] {
    auto m = nn::make<nn::Sequential>();
    m->push_back(nn::make<nn::Linear>(8, 32));
    m->push_back(nn::make<nn::ReLU>());
    m->push_back(nn::make<nn::Dropout>(0.3));
    m->push_back(nn::make<nn::Linear>(32, 4));
    return m;
  };
  auto [e, c] = twins(make, DType::f64);
  nn::Module* cm = c.get();
  auto f = compile_loss(cm);
  std::vector<Batch> bs;
  const int64_t sizes[] = {6, 6, 9};
  for (int s = 0; s < 3; ++s) bs.push_back(batch({sizes[s], 8}, 4, DType::f64, 80 + s));
  uint64_t seed = 500;
  train_and_compare(
      e, c,
      [&](const Batch& b) {
        manual_seed(++seed);
        return loss_of(*e, b);
      },
      [&](const Batch& b) {
        manual_seed(seed);
        return f({b.x, b.y})[0];
      },
      bs, 1e-12, 1e-13);
  // Another seed gives another mask: the compiled forward really draws.
  manual_seed(1);
  Tensor l1 = f({bs[0].x, bs[0].y})[0];
  manual_seed(2);
  Tensor l2 = f({bs[0].x, bs[0].y})[0];
  EXPECT_NE(l1.item(), l2.item());
}

TEST_P(AotAutograd, NoGradCallsStayInference) {
  auto [e, c] = twins(mlp, DType::f32);
  auto f = lathe::compile(std::static_pointer_cast<nn::Module>(c), options());
  Tensor x = randn({2, 8});
  {
    NoGradGuard no_grad;
    Tensor y = f({x})[0];
    EXPECT_FALSE(y.requires_grad());
  }
  Tensor y = f({x})[0];  // grad mode is guarded: a training entry
  EXPECT_TRUE(y.requires_grad());
  EXPECT_EQ(f.stats().compiles, 2);
}
