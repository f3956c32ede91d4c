#include "lathe/core/random.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "lathe/core/threads.h"

namespace lathe {

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> c, uint64_t key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kMul0) * c[0];
    uint64_t p1 = static_cast<uint64_t>(kMul1) * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k0, static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k1, static_cast<uint32_t>(p0)};
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return c;
}

namespace {

constexpr int kLanes = 8;  // counters computed together (the rounds vectorize across lanes)

// Philox4x32-10 of the counters first, first + 1, ..., first + kLanes - 1 (key: the seed); lane
// l's four words land in w[0..3][l].
void philox_lanes(uint64_t seed, uint64_t first, uint32_t (&w)[4][kLanes]) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int l = 0; l < kLanes; ++l) {
    uint64_t c = first + static_cast<uint64_t>(l);
    w[0][l] = static_cast<uint32_t>(c);
    w[1][l] = static_cast<uint32_t>(c >> 32);
    w[2][l] = 0;
    w[3][l] = 0;
  }
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    for (int l = 0; l < kLanes; ++l) {
      uint64_t p0 = static_cast<uint64_t>(kMul0) * w[0][l];
      uint64_t p1 = static_cast<uint64_t>(kMul1) * w[2][l];
      uint32_t c1 = w[1][l], c3 = w[3][l];
      w[0][l] = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
      w[1][l] = static_cast<uint32_t>(p1);
      w[2][l] = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
      w[3][l] = static_cast<uint32_t>(p0);
    }
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
}

// [0, 1) with 53 random bits from two words.
inline double unit(uint32_t lo, uint32_t hi) {
  uint64_t w = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<double>(w >> 11) * 0x1.0p-53;
}

// Each counter gives two values: element k of a fill takes value k % 2 of counter first + k / 2.
constexpr int kPerCounter = 2;

// The two values of counter c for each distribution.
struct UniformDraw {
  double lo, hi;
  void operator()(const uint32_t (&w)[4][kLanes], int l, double* out) const {
    out[0] = lo + (hi - lo) * unit(w[0][l], w[1][l]);
    out[1] = lo + (hi - lo) * unit(w[2][l], w[3][l]);
  }
};

// Box-Muller: both the cosine and the sine branch.
struct NormalDraw {
  double mean, stddev;
  void operator()(const uint32_t (&w)[4][kLanes], int l, double* out) const {
    double u1 = 1.0 - unit(w[0][l], w[1][l]);  // (0, 1]: log is finite
    double u2 = unit(w[2][l], w[3][l]);
    double r = stddev * std::sqrt(-2.0 * std::log(u1));
    double angle = 2.0 * std::numbers::pi * u2;
    out[0] = mean + r * std::cos(angle);
    out[1] = mean + r * std::sin(angle);
  }
};

// Uniform integers in [lo, hi) by a 128-bit multiply (bias below range / 2^64).
struct RandintDraw {
  int64_t lo, hi;
  int64_t pick(uint32_t a, uint32_t b) const {
    uint64_t range = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
    uint64_t w = (static_cast<uint64_t>(b) << 32) | a;
    unsigned __int128 m = static_cast<unsigned __int128>(w) * range;
    return static_cast<int64_t>(static_cast<uint64_t>(lo) + static_cast<uint64_t>(m >> 64));
  }
  void operator()(const uint32_t (&w)[4][kLanes], int l, int64_t* out) const {
    out[0] = pick(w[0][l], w[1][l]);
    out[1] = pick(w[2][l], w[3][l]);
  }
};

// Values [begin, end) of a stream starting at counter `first`, passed one by one to put(k, v).
template <class V, class Draw, class Put>
void draw_range(uint64_t seed, uint64_t first, int64_t begin, int64_t end, const Draw& draw,
                Put put) {
  constexpr int64_t kBlock = kLanes * kPerCounter;
  uint32_t w[4][kLanes];
  V vals[kBlock];
  for (int64_t b = begin - begin % kBlock; b < end; b += kBlock) {
    philox_lanes(seed, first + static_cast<uint64_t>(b / kPerCounter), w);
    for (int l = 0; l < kLanes; ++l) draw(w, l, vals + l * kPerCounter);
    for (int64_t k = std::max(b, begin); k < std::min(end, b + kBlock); ++k) put(k, vals[k - b]);
  }
}

uint64_t counters_for(int64_t n) {
  return static_cast<uint64_t>((n + kPerCounter - 1) / kPerCounter);
}

// Writes value k of the stream (seed, first) to the element at logical row-major index k of a
// tensor with sizes `sz` and strides `st` (elements) at p, in parallel chunks.
template <class T, class V, class Draw>
void fill_chunks(T* p, const std::vector<int64_t>& sz, const std::vector<int64_t>& st, bool dense,
                 int64_t n, uint64_t seed, uint64_t first, const Draw& draw) {
  constexpr int64_t kChunk = 16384;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const int threads = n >= 2 * kChunk ? num_threads() : 1;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunk, end = std::min(n, begin + kChunk);
    if (dense) {
      draw_range<V>(seed, first, begin, end, draw,
                    [p](int64_t k, V v) { p[k] = static_cast<T>(v); });
      continue;
    }
    // Strided: the multi-index of `begin`, then an odometer.
    std::vector<int64_t> idx(sz.size(), 0);
    int64_t rest = begin, off = 0;
    for (int64_t d = static_cast<int64_t>(sz.size()) - 1; d >= 0; --d) {
      idx[d] = rest % sz[d];
      rest /= sz[d];
      off += idx[d] * st[d];
    }
    draw_range<V>(seed, first, begin, end, draw, [&](int64_t, V v) {
      p[off] = static_cast<T>(v);
      for (int64_t d = static_cast<int64_t>(sz.size()) - 1; d >= 0; --d) {
        off += st[d];
        if (++idx[d] < sz[d]) break;
        off -= idx[d] * st[d];
        idx[d] = 0;
      }
    });
  }
}

template <class V, class Draw>
void fill_indexed(const Tensor& t, const char* what, uint64_t seed, uint64_t first,
                  const Draw& draw) {
  const int64_t n = t.numel();
  if (n == 0) return;
  const std::vector<int64_t> sz = t.shape(), st = t.int_strides();
  const bool dense = t.is_contiguous();
  LATHE_DISPATCH_ALL_AND_HALF(t.dtype(), what, [&] {
    fill_chunks<scalar_t, V>(static_cast<scalar_t*>(t.raw_data()), sz, st, dense, n, seed, first,
                             draw);
  });
  t.bump_version();
}

// One value of the stream (for the scalar draws).
template <class V, class Draw>
V draw_one(uint64_t seed, uint64_t first, const Draw& draw) {
  V v{};
  draw_range<V>(seed, first, 0, 1, draw, [&](int64_t, V x) { v = x; });
  return v;
}

}  // namespace

void Generator::seed(uint64_t s) {
  std::lock_guard<std::mutex> lock(mu_);
  seed_ = s;
  offset_ = 0;
}

uint64_t Generator::offset() const {
  std::lock_guard<std::mutex> lock(mu_);
  return offset_;
}

Generator::State Generator::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {seed_, offset_};
}

void Generator::set_state(const State& s) {
  std::lock_guard<std::mutex> lock(mu_);
  seed_ = s.seed;
  offset_ = s.offset;
}

Generator::Counters Generator::reserve(uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  Counters c{seed_, offset_};
  offset_ += n;
  return c;
}

double Generator::uniform(double lo, double hi) {
  Counters c = reserve(1);
  return draw_one<double>(c.seed, c.first, UniformDraw{lo, hi});
}

double Generator::normal(double mean, double stddev) {
  Counters c = reserve(1);
  return draw_one<double>(c.seed, c.first, NormalDraw{mean, stddev});
}

int64_t Generator::randint(int64_t lo, int64_t hi) {
  LATHE_CHECK(lo < hi, "[randint] empty range [", lo, ", ", hi, ")");
  Counters c = reserve(1);
  return draw_one<int64_t>(c.seed, c.first, RandintDraw{lo, hi});
}

void Generator::fill_uniform(const Tensor& t, double lo, double hi) {
  const Counters c = reserve(counters_for(t.numel()));
  fill_indexed<double>(t, "rand", c.seed, c.first, UniformDraw{lo, hi});
}

void Generator::fill_normal(const Tensor& t, double mean, double stddev) {
  const Counters c = reserve(counters_for(t.numel()));
  fill_indexed<double>(t, "randn", c.seed, c.first, NormalDraw{mean, stddev});
}

void Generator::fill_randint(const Tensor& t, int64_t lo, int64_t hi) {
  LATHE_CHECK(lo < hi, "[randint] empty range [", lo, ", ", hi, ")");
  const Counters c = reserve(counters_for(t.numel()));
  fill_indexed<int64_t>(t, "randint", c.seed, c.first, RandintDraw{lo, hi});
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
  (gen ? *gen : default_generator()).fill_randint(t, low, high);
  return t;
}

}  // namespace lathe
