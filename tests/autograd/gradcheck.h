// gradcheck: the gradients backward() computes against central finite differences in f64.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "lathe/core/grad_mode.h"
#include "lathe/core/random.h"
#include "lathe/ops/ops.h"

namespace lathe::testing {

using GradFn = std::function<Tensor(const std::vector<Tensor>&)>;

// f64 random input (normal), contiguous.
inline Tensor rnd(const Shape& s, uint64_t seed, double scale = 1.0) {
  Generator gen(seed);
  return mul(randn(s, DType::f64, &gen), scale);
}
// f64 random input in [lo, hi).
inline Tensor uni(const Shape& s, uint64_t seed, double lo, double hi) {
  Generator gen(seed);
  return add(mul(rand(s, DType::f64, &gen), hi - lo), lo);
}

// Checks d(sum(f(inputs) * v))/d(input) for every floating input against finite differences.
// Integer inputs (indices, targets) are passed through.
inline void gradcheck(const std::string& name, const GradFn& f, std::vector<Tensor> inputs,
                      double tol = 1e-6) {
  SCOPED_TRACE(name);
  std::vector<Tensor> leaves;
  for (const Tensor& t : inputs) {
    if (!t.defined()) {
      leaves.emplace_back();
      continue;
    }
    Tensor c = t.clone();
    if (is_floating(c.dtype())) c.set_requires_grad(true);
    leaves.push_back(c);
  }
  Tensor out = f(leaves);
  ASSERT_TRUE(out.requires_grad()) << name << ": output does not require grad";
  Generator gen(4242);
  const Tensor v = randn(out.sizes(), DType::f64, &gen);
  out.backward(v);
  const std::vector<double> vv = v.to_vector<double>();
  auto loss = [&]() {
    NoGradGuard no_grad;
    std::vector<double> o = f(leaves).to_vector<double>();
    double s = 0;
    for (size_t k = 0; k < o.size(); ++k) s += o[k] * vv[k];
    return s;
  };
  const double h = 1e-6;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const Tensor& x = leaves[i];
    if (!x.defined() || !is_floating(x.dtype())) continue;
    const Tensor g = x.grad();
    ASSERT_TRUE(g.defined()) << name << ": input " << i << " got no gradient";
    ASSERT_EQ(g.shape(), x.shape()) << name << ": input " << i;
    const std::vector<double> gv = g.to_vector<double>();
    double* p = x.data<double>();
    for (int64_t j = 0; j < x.numel(); ++j) {
      const double keep = p[j];
      p[j] = keep + h;
      const double up = loss();
      p[j] = keep - h;
      const double down = loss();
      p[j] = keep;
      const double numeric = (up - down) / (2 * h);
      const double err = std::abs(numeric - gv[j]) / (1.0 + std::abs(numeric));
      if (err > tol)
        ADD_FAILURE() << name << ": input " << i << " element " << j << ": backward " << gv[j]
                      << ", finite difference " << numeric;
      if (err > tol) break;
    }
  }
}

}  // namespace lathe::testing
