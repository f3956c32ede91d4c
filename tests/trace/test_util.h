// Helpers shared by the trace tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lathe/core/random.h"
#include "lathe/core/tensor.h"

namespace lathe::test {

// Random normal tensor from a fixed seed.
inline Tensor randn_seeded(const std::vector<int64_t>& shape, uint64_t seed) {
  Generator g(seed);
  return randn(to_shape(shape), DType::f32, &g);
}

// Exact equality of shapes and values (the interpreter runs the eager kernels).
inline ::testing::AssertionResult same_values(const Tensor& a, const Tensor& b, double tol = 0.0) {
  if (a.shape() != b.shape())
    return ::testing::AssertionFailure()
           << "shapes differ: " << a.shape_string() << " vs " << b.shape_string();
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    double d = x[i] - y[i];
    if (d < 0) d = -d;
    double scale = y[i] < 0 ? -y[i] : y[i];
    if (d > tol * (1.0 + scale))
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i];
  }
  return ::testing::AssertionSuccess();
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace lathe::test
