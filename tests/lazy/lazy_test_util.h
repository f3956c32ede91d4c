// Helpers shared by the lazy device tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "lathe/core/random.h"
#include "lathe/core/tensor.h"
#include "lathe/lazy/lazy.h"
#include "lathe/models/registry.h"
#include "tests/models/small_models.h"

namespace lathe::lazy_test {

// Random normal data from a fixed seed (never zeros).
inline Tensor randn(const Shape& sizes, uint64_t seed) {
  Generator g(seed);
  Tensor t = empty(sizes);
  g.fill_normal(t, 0.0, 1.0);
  return t;
}

// Elementwise |a - b| <= atol + rtol * |b|, reporting the worst element.
inline ::testing::AssertionResult all_close(const Tensor& a, const Tensor& b, double rtol = 1e-5,
                                            double atol = 1e-5) {
  if (a.shape() != b.shape())
    return ::testing::AssertionFailure() << a.shape_string() << " vs " << b.shape_string();
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double err = std::abs(x[i] - y[i]) - (atol + rtol * std::abs(y[i]));
    if (!(err <= worst)) {
      worst = std::isnan(err) ? INFINITY : err;
      at = i;
    }
  }
  if (worst > 0)
    return ::testing::AssertionFailure()
           << "element " << at << ": " << x[at] << " vs " << y[at] << " in " << a.shape_string();
  return ::testing::AssertionSuccess();
}

// Inputs for the small model configs (tests/models/small_models.h, image size 64).
inline std::vector<Tensor> small_inputs(const std::string& name, int64_t batch, uint64_t seed) {
  models::InputOptions io;
  if (models::is_cnn(name)) io.image_size = 64;
  if (name == "bert") {
    io.bert = test_models::small_bert(64);
    io.seq_len = 12;
  }
  if (name == "vit") io.vit = test_models::small_vit();
  return models::default_inputs(name, batch, seed, io);
}

inline std::vector<Tensor> to_device(const std::vector<Tensor>& ts, Device d) {
  std::vector<Tensor> r;
  for (const Tensor& t : ts) r.push_back(t.to(d));
  return r;
}

}  // namespace lathe::lazy_test
