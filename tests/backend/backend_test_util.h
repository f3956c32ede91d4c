// Helpers shared by the cpu backend's tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "lathe/core/tensor.h"

namespace lathe::testing {

// The largest |a - b| / (1 + |b|) over the elements (a compiled result against eager's: folding
// and other layouts round differently).
inline double max_rel_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i)
    m = std::max(m, std::abs(x[i] - y[i]) / (1.0 + std::abs(y[i])));
  return m;
}

}  // namespace lathe::testing
