#include "lathe/core/random.h"

namespace lathe {

void Generator::seed(uint64_t s) {
  std::lock_guard<std::mutex> lock(mu_);
  engine_.seed(s);
}

double Generator::uniform(double lo, double hi) {
  std::lock_guard<std::mutex> lock(mu_);
  return std::uniform_real_distribution<double>(lo, hi)(engine_);
}

double Generator::normal(double mean, double stddev) {
  std::lock_guard<std::mutex> lock(mu_);
  return std::normal_distribution<double>(mean, stddev)(engine_);
}

std::mt19937_64 Generator::state() {
  std::lock_guard<std::mutex> lock(mu_);
  return engine_;
}

void Generator::set_state(const std::mt19937_64& s) {
  std::lock_guard<std::mutex> lock(mu_);
  engine_ = s;
}

int64_t Generator::randint(int64_t lo, int64_t hi) {
  LATHE_CHECK(lo < hi, "[randint] empty range [", lo, ", ", hi, ")");
  std::lock_guard<std::mutex> lock(mu_);
  return std::uniform_int_distribution<int64_t>(lo, hi - 1)(engine_);
}

template <class Draw>
static void fill_with(const Tensor& t, Draw draw) {
  if (t.is_contiguous()) {
    LATHE_DISPATCH_ALL(t.dtype(), "random", [&] {
      scalar_t* p = static_cast<scalar_t*>(t.raw_data());
      const int64_t n = t.numel();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<scalar_t>(draw());
    });
    t.bump_version();
    return;
  }
  // Draw in logical order, placing each value by strides.
  std::vector<int64_t> sz = t.shape(), st = t.int_strides();
  int64_t n = t.numel();
  std::vector<int64_t> idx(sz.size(), 0);
  LATHE_DISPATCH_ALL(t.dtype(), "random", [&] {
    scalar_t* p = static_cast<scalar_t*>(t.raw_data());
    for (int64_t i = 0; i < n; ++i) {
      int64_t off = 0;
      for (size_t d = 0; d < sz.size(); ++d) off += idx[d] * st[d];
      p[off] = static_cast<scalar_t>(draw());
      for (int64_t d = static_cast<int64_t>(sz.size()) - 1; d >= 0; --d) {
        if (++idx[d] < sz[d]) break;
        idx[d] = 0;
      }
    }
  });
  t.bump_version();
}

void Generator::fill_uniform(const Tensor& t, double lo, double hi) {
  std::lock_guard<std::mutex> lock(mu_);
  std::uniform_real_distribution<double> dist(lo, hi);
  fill_with(t, [&] { return dist(engine_); });
}

void Generator::fill_normal(const Tensor& t, double mean, double stddev) {
  std::lock_guard<std::mutex> lock(mu_);
  std::normal_distribution<double> dist(mean, stddev);
  fill_with(t, [&] { return dist(engine_); });
}

Generator& default_generator() {
  static Generator gen;
  return gen;
}

void manual_seed(uint64_t seed) { default_generator().seed(seed); }

Tensor rand(const Shape& sizes, DType dtype, Generator* gen) {
  LATHE_CHECK(is_floating(dtype), "[rand] needs a floating dtype, got ", dtype_name(dtype));
  Tensor t = empty(sizes, dtype);
  (gen ? *gen : default_generator()).fill_uniform(t, 0.0, 1.0);
  return t;
}

Tensor randn(const Shape& sizes, DType dtype, Generator* gen) {
  LATHE_CHECK(is_floating(dtype), "[randn] needs a floating dtype, got ", dtype_name(dtype));
  Tensor t = empty(sizes, dtype);
  (gen ? *gen : default_generator()).fill_normal(t, 0.0, 1.0);
  return t;
}

Tensor randint(int64_t low, int64_t high, const Shape& sizes, DType dtype, Generator* gen) {
  LATHE_CHECK(low < high, "[randint] empty range [", low, ", ", high, ")");
  Tensor t = empty(sizes, dtype);
  Generator& g = gen ? *gen : default_generator();
  int64_t n = t.numel();
  LATHE_DISPATCH_ALL(dtype, "randint", [&] {
    scalar_t* p = t.data<scalar_t>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<scalar_t>(g.randint(low, high));
  });
  return t;
}

}  // namespace lathe
