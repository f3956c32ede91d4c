#include "lathe/nn/init.h"

#include <cmath>

#include "lathe/core/random.h"

namespace lathe::nn::init {

std::pair<int64_t, int64_t> fans(const Tensor& w) {
  LATHE_CHECK(w.dim() >= 2, "[init] fan in/out need a tensor of at least 2 dims, got ",
              w.shape_string());
  std::vector<int64_t> s = w.shape();
  int64_t receptive = 1;
  for (size_t i = 2; i < s.size(); ++i) receptive *= s[i];
  return {s[1] * receptive, s[0] * receptive};
}

void uniform_(const Tensor& t, double lo, double hi) {
  default_generator().fill_uniform(t, lo, hi);
}

void normal_(const Tensor& t, double mean, double stddev) {
  default_generator().fill_normal(t, mean, stddev);
}

void constant_(const Tensor& t, double v) {
  // A strided fill through the generator's placement loop would draw numbers; write directly.
  std::vector<int64_t> sz = t.shape(), st = t.int_strides();
  int64_t n = t.numel();
  std::vector<int64_t> idx(sz.size(), 0);
  LATHE_DISPATCH_ALL_AND_HALF(t.dtype(), "init.constant_", [&] {
    scalar_t* p = static_cast<scalar_t*>(t.raw_data());
    for (int64_t i = 0; i < n; ++i) {
      int64_t off = 0;
      for (size_t d = 0; d < sz.size(); ++d) off += idx[d] * st[d];
      p[off] = static_cast<scalar_t>(v);
      for (int64_t d = static_cast<int64_t>(sz.size()) - 1; d >= 0; --d) {
        if (++idx[d] < sz[d]) break;
        idx[d] = 0;
      }
    }
  });
  t.bump_version();
}

// torch.nn.init.calculate_gain("leaky_relu", a); a = 0 is relu's sqrt(2).
static double leaky_relu_gain(double a) { return std::sqrt(2.0 / (1.0 + a * a)); }

void kaiming_uniform_(const Tensor& w, double a, bool fan_in_mode) {
  auto [fan_in, fan_out] = fans(w);
  int64_t fan = fan_in_mode ? fan_in : fan_out;
  LATHE_CHECK(fan > 0, "[init.kaiming_uniform_] zero fan for ", w.shape_string());
  double bound = std::sqrt(3.0) * leaky_relu_gain(a) / std::sqrt(static_cast<double>(fan));
  uniform_(w, -bound, bound);
}

void kaiming_normal_(const Tensor& w, double a, bool fan_in_mode) {
  auto [fan_in, fan_out] = fans(w);
  int64_t fan = fan_in_mode ? fan_in : fan_out;
  LATHE_CHECK(fan > 0, "[init.kaiming_normal_] zero fan for ", w.shape_string());
  normal_(w, 0.0, leaky_relu_gain(a) / std::sqrt(static_cast<double>(fan)));
}

void xavier_uniform_(const Tensor& w, double gain) {
  auto [fan_in, fan_out] = fans(w);
  double bound = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  uniform_(w, -bound, bound);
}

void trunc_normal_(const Tensor& t, double mean, double stddev, double lo, double hi) {
  LATHE_CHECK(lo < hi, "[init.trunc_normal_] empty range [", lo, ", ", hi, "]");
  LATHE_CHECK(stddev > 0, "[init.trunc_normal_] stddev must be positive, got ", stddev);
  // Normal draws written in place, then out-of-range elements redrawn (rejection sampling).
  normal_(t, mean, stddev);
  Generator& g = default_generator();
  std::vector<int64_t> sz = t.shape(), st = t.int_strides();
  int64_t n = t.numel();
  std::vector<int64_t> idx(sz.size(), 0);
  LATHE_DISPATCH_FLOATING(t.dtype(), "init.trunc_normal_", [&] {
    scalar_t* p = static_cast<scalar_t*>(t.raw_data());
    for (int64_t i = 0; i < n; ++i) {
      int64_t off = 0;
      for (size_t d = 0; d < sz.size(); ++d) off += idx[d] * st[d];
      for (int tries = 0; (p[off] < lo || p[off] > hi); ++tries) {
        LATHE_CHECK(tries < 1000, "[init.trunc_normal_] range [", lo, ", ", hi,
                    "] is too far from mean ", mean, " for stddev ", stddev);
        p[off] = static_cast<scalar_t>(g.normal(mean, stddev));
      }
      for (int64_t d = static_cast<int64_t>(sz.size()) - 1; d >= 0; --d) {
        if (++idx[d] < sz[d]) break;
        idx[d] = 0;
      }
    }
  });
}

}  // namespace lathe::nn::init
