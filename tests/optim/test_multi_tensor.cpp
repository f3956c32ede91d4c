// The fused multi-tensor optimizer steps give bit for bit the parameters and state of the
// per-tensor steps, for SGD (momentum, dampening, nesterov, weight decay) and Adam / AdamW, in f32
// and f64, with parameters that skip steps (no gradient) and with a layout that cannot be fused.
#include <gtest/gtest.h>

#include <functional>
#include <memory>

#include "lathe/core/random.h"
#include "lathe/ops/ops.h"
#include "lathe/optim/optimizer.h"

using namespace lathe;
using namespace lathe::optim;

namespace {

std::vector<Tensor> make_params(DType dt, uint64_t seed) {
  manual_seed(seed);
  std::vector<Tensor> ps;
  for (const Shape& s : std::vector<Shape>{{64, 3, 7, 7}, {64}, {300, 256}, {5}, {40000}})
    ps.push_back(randn(s, dt).set_requires_grad(true));
  return ps;
}

// Gives every parameter the same random gradient in both sets (parameter 1 none at step 1).
void set_grads(std::vector<Tensor>& a, std::vector<Tensor>& b, int step, bool strided_grad) {
  manual_seed(100 + step);
  for (size_t i = 0; i < a.size(); ++i) {
    if (i == 1 && step == 1) {
      a[i].set_grad({});
      b[i].set_grad({});
      continue;
    }
    Tensor g = randn(a[i].sizes(), a[i].dtype());
    a[i].set_grad(g.clone());
    if (strided_grad && i == 2) {  // a transposed copy: same values, not contiguous
      b[i].set_grad(g.t().contiguous().t());
      ASSERT_FALSE(b[i].grad().is_contiguous());
    } else {
      b[i].set_grad(g.clone());
    }
  }
}

void expect_bitwise_equal(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  size_t diff = 0;
  for (size_t i = 0; i < x.size(); ++i) diff += x[i] != y[i];
  EXPECT_EQ(diff, 0u) << what << ": " << diff << " of " << x.size() << " elements differ";
}

using Factory = std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>, bool fused)>;

void check_fused_equals_per_tensor(const Factory& make, DType dt, bool strided_grad,
                                   const std::string& what) {
  std::vector<Tensor> a = make_params(dt, 7), b = make_params(dt, 7);
  auto per_tensor = make(a, false), fused = make(b, true);
  for (int step = 0; step < 3; ++step) {
    set_grads(a, b, step, strided_grad);
    per_tensor->step();
    fused->step();
  }
  for (size_t i = 0; i < a.size(); ++i)
    expect_bitwise_equal(a[i], b[i], what + " parameter " + std::to_string(i));
  auto sa = per_tensor->state_dict(), sb = fused->state_dict();
  ASSERT_EQ(sa.state.size(), sb.state.size()) << what;
  for (const auto& [i, entries] : sa.state)
    for (const auto& [key, t] : entries)
      expect_bitwise_equal(t, sb.state.at(i).at(key), what + " state " + key);
}

}  // namespace

TEST(MultiTensorOptim, FusedSgdEqualsPerTensorBitForBit) {
  struct Cfg {
    double momentum, dampening, wd;
    bool nesterov;
  };
  for (const Cfg& c : {Cfg{0, 0, 0, false}, Cfg{0.9, 0, 0, false}, Cfg{0.9, 0.1, 1e-4, false},
                       Cfg{0.9, 0, 5e-4, true}}) {
    for (DType dt : {DType::f32, DType::f64}) {
      Factory make = [&](std::vector<Tensor> ps, bool fused) {
        SGDOptions o;
        o.lr = 0.05;
        o.momentum = c.momentum;
        o.dampening = c.dampening;
        o.weight_decay = c.wd;
        o.nesterov = c.nesterov;
        o.fused = fused;
        return std::make_unique<SGD>(std::move(ps), o);
      };
      const std::string what = std::string("SGD momentum ") + std::to_string(c.momentum) +
                               " nesterov " + std::to_string(c.nesterov) + " " + dtype_name(dt);
      check_fused_equals_per_tensor(make, dt, false, what);
    }
  }
}

TEST(MultiTensorOptim, FusedAdamAndAdamWEqualPerTensorBitForBit) {
  for (bool decoupled : {false, true}) {
    for (double wd : {0.0, 1e-2}) {
      for (DType dt : {DType::f32, DType::f64}) {
        Factory make = [&](std::vector<Tensor> ps, bool fused) -> std::unique_ptr<Optimizer> {
          AdamOptions o;
          o.lr = 1e-3;
          o.weight_decay = wd;
          o.fused = fused;
          return std::make_unique<Adam>(std::move(ps), o, decoupled);
        };
        check_fused_equals_per_tensor(make, dt, false,
                                      std::string(decoupled ? "AdamW" : "Adam") + " wd " +
                                          std::to_string(wd) + " " + dtype_name(dt));
      }
    }
  }
}

TEST(MultiTensorOptim, NonContiguousGradientFallsBackWithTheSameResult) {
  Factory make = [](std::vector<Tensor> ps, bool fused) -> std::unique_ptr<Optimizer> {
    AdamOptions o;
    o.fused = fused;
    return std::make_unique<Adam>(std::move(ps), o);
  };
  check_fused_equals_per_tensor(make, DType::f32, true, "Adam, one transposed gradient");
}

TEST(MultiTensorOptim, FusedStepBumpsParameterVersions) {
  // Caches keyed on storage versions (oneDNN's reordered weights) must see the update.
  std::vector<Tensor> ps = make_params(DType::f32, 3);
  SGDOptions o;
  o.lr = 0.1;
  o.fused = true;
  SGD opt(ps, o);
  for (Tensor& p : ps) p.set_grad(randn(p.sizes()));
  const uint64_t before = ps[0].impl().storage->version();
  opt.step();
  EXPECT_GT(ps[0].impl().storage->version(), before);
}
