// bf16 and f16: the conversions (every bit pattern, rounding to nearest even, NaN and inf,
// f16's subnormals and overflow), the dtype rules, and tensors of them through factories, casts,
// printing and ops (which compute in f32 and round once).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "lathe/core/half.h"
#include "lathe/core/random.h"
#include "lathe/core/tensor.h"
#include "lathe/ops/ops.h"

using namespace lathe;

namespace {

// The value of a bf16 bit pattern, computed without half.h: sign, exponent, mantissa.
double bf16_value(uint16_t h) {
  int sign = h >> 15, exp = (h >> 7) & 0xff, mant = h & 0x7f;
  double v = exp == 0 ? std::ldexp(mant, -133) : std::ldexp(128 + mant, exp - 134);
  if (exp == 0xff) v = mant ? NAN : INFINITY;
  return sign ? -v : v;
}

double f16_value(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  if (exp == 0x1f) v = mant ? NAN : INFINITY;
  return sign ? -v : v;
}

// The rounding-to-nearest-even reference: of all finite patterns of one sign, the nearest to
// f (ties: even mantissa); beyond the largest finite value by half an ulp or more, inf.
template <class ValueOf>
uint16_t nearest(double f, ValueOf value_of, uint16_t max_finite, uint16_t inf) {
  uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  double a = std::fabs(f);
  double top = value_of(max_finite), ulp = top - value_of(max_finite - 1);
  if (a >= top + ulp / 2) return sign | inf;
  uint16_t lo = 0, hi = max_finite;  // the largest pattern with value <= a, by bisection
  while (lo < hi) {
    uint16_t mid = static_cast<uint16_t>((lo + hi + 1) / 2);
    if (value_of(mid) <= a)
      lo = mid;
    else
      hi = mid - 1;
  }
  if (lo == max_finite) return sign | lo;
  double dlo = a - value_of(lo), dhi = value_of(lo + 1) - a;
  if (dlo < dhi || (dlo == dhi && (lo & 1) == 0)) return sign | lo;
  return sign | static_cast<uint16_t>(lo + 1);
}

std::vector<float> probe_floats() {
  std::mt19937 rng(7);
  std::vector<float> out;
  for (int i = 0; i < 20000; ++i) {
    uint32_t bits = rng();
    float f = detail::float_from_bits(bits);
    if (!std::isnan(f)) out.push_back(f);
  }
  // Ties and neighbours of ties, tiny and huge values.
  for (float f : {1.00390625f, 1.01171875f, 1.0f + 1.0f / 256, 3.0e38f, 3.4028235e38f, 1e-40f,
                  65504.0f, 65519.99f, 65520.0f, 5.9604645e-08f, 2.9802322e-08f, 8.940697e-08f,
                  6.1035156e-05f, 6.1e-05f, -0.0f, 0.0f}) {
    out.push_back(f);
    out.push_back(std::nextafter(f, INFINITY));
    out.push_back(std::nextafter(f, -INFINITY));
  }
  return out;
}

}  // namespace

TEST(Half, EveryBf16PatternConvertsExactly) {
  for (uint32_t b = 0; b < 65536; ++b) {
    uint16_t h = static_cast<uint16_t>(b);
    float f = BFloat16::from_bits(h);
    double ref = bf16_value(h);
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(f)) << b;
      BFloat16 back(f);
      ASSERT_TRUE(std::isnan(float(back))) << b;
      ASSERT_EQ(back.bits & 0x8000, h & 0x8000) << "NaN keeps its sign: " << b;
    } else {
      ASSERT_EQ(static_cast<double>(f), ref) << b;
      ASSERT_EQ(BFloat16(f).bits, h) << b;
    }
  }
}

TEST(Half, EveryF16PatternConvertsExactly) {
  for (uint32_t b = 0; b < 65536; ++b) {
    uint16_t h = static_cast<uint16_t>(b);
    float f = Half::from_bits(h);
    double ref = f16_value(h);
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(f)) << b;
      ASSERT_TRUE(std::isnan(float(Half(f)))) << b;
    } else {
      ASSERT_EQ(static_cast<double>(f), ref) << b;
      ASSERT_EQ(Half(f).bits, h) << b;
    }
  }
}

TEST(Half, RoundsToNearestEven) {
  for (float f : probe_floats()) {
    ASSERT_EQ(BFloat16(f).bits, nearest(f, bf16_value, 0x7f7f, 0x7f80)) << f;
    ASSERT_EQ(Half(f).bits, nearest(f, f16_value, 0x7bff, 0x7c00)) << f;
  }
  EXPECT_EQ(float(Half(65519.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(float(Half(65520.0f))));
  EXPECT_EQ(float(Half(std::ldexp(1.0f, -25))), 0.0f);  // a tie below the smallest subnormal
  EXPECT_EQ(float(Half(3 * std::ldexp(1.0f, -26))), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(float(BFloat16(3.4028235e38f))));  // FLT_MAX rounds up to inf
  EXPECT_TRUE(std::isnan(float(BFloat16(NAN))));
  EXPECT_TRUE(std::isnan(float(Half(NAN))));
}

TEST(Half, DTypeRules) {
  EXPECT_EQ(itemsize(DType::bf16), 2u);
  EXPECT_EQ(itemsize(DType::f16), 2u);
  EXPECT_STREQ(dtype_name(DType::bf16), "bf16");
  EXPECT_STREQ(dtype_name(DType::f16), "f16");
  EXPECT_TRUE(is_floating(DType::bf16));
  EXPECT_TRUE(is_floating(DType::f16));
  EXPECT_TRUE(is_low_precision(DType::bf16));
  EXPECT_FALSE(is_low_precision(DType::f32));
  // PyTorch's promotion: ints < the 16-bit floats < f32 < f64; bf16 with f16 gives f32.
  EXPECT_EQ(promote_types(DType::bf16, DType::bf16), DType::bf16);
  EXPECT_EQ(promote_types(DType::bf16, DType::f16), DType::f32);
  EXPECT_EQ(promote_types(DType::f16, DType::bf16), DType::f32);
  EXPECT_EQ(promote_types(DType::bf16, DType::f32), DType::f32);
  EXPECT_EQ(promote_types(DType::f64, DType::f16), DType::f64);
  EXPECT_EQ(promote_types(DType::i64, DType::bf16), DType::bf16);
  EXPECT_EQ(promote_types(DType::b8, DType::f16), DType::f16);
  EXPECT_EQ(promote_with_scalar(DType::bf16, true), DType::bf16);
  EXPECT_EQ(promote_with_scalar(DType::f16, false), DType::f16);
}

TEST(Half, TensorsFactoriesCastsAndPrinting) {
  Tensor f = full({3}, 1.5, DType::bf16);
  EXPECT_EQ(f.dtype(), DType::bf16);
  EXPECT_EQ(f.nbytes(), 6u);
  EXPECT_EQ(f.to_vector<float>(), (std::vector<float>{1.5f, 1.5f, 1.5f}));
  EXPECT_EQ(f.shape_string(), "bf16[3]");
  // f32 -> bf16 rounds to nearest even; bf16 -> f32 is exact.
  Tensor x = full({2}, 1.0 + 1.0 / 256, DType::f32);  // a tie: rounds down to 1
  EXPECT_EQ(x.to(DType::bf16).to_vector<float>(), (std::vector<float>{1.0f, 1.0f}));
  Tensor y = full({2}, 1.0 + 3.0 / 256, DType::f32);  // a tie: rounds up to the even 1 + 1/64
  EXPECT_EQ(y.to(DType::bf16).to(DType::f32).to_vector<float>()[0], 1.0f + 1.0f / 64);
  EXPECT_EQ(full({1}, 70000.0).to(DType::f16).to_vector<float>()[0], INFINITY);
  Tensor r = arange(0, 4, 1, DType::f16);
  EXPECT_EQ(r.to_vector<double>(), (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(r.to(DType::i64).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_NE(full({2}, 0.5, DType::bf16).to_string().find("0.5"), std::string::npos);
  manual_seed(3);
  Tensor n = randn({1000}, DType::bf16);
  EXPECT_EQ(n.dtype(), DType::bf16);
  std::vector<float> v = n.to_vector<float>();
  for (float e : v) EXPECT_EQ(float(BFloat16(e)), e) << "a bf16 value";
  double mean = 0;
  for (float e : v) mean += e;
  EXPECT_LT(std::fabs(mean / 1000), 0.15);
}

TEST(Half, OpsComputeInF32AndRoundOnce) {
  manual_seed(5);
  Tensor a32 = randn({37, 19}), b32 = randn({37, 19});
  Tensor a = a32.to(DType::bf16), b = b32.to(DType::bf16);
  // Pointwise: the f32 result of the bf16 values, rounded once.
  Tensor s = add(a, b);
  EXPECT_EQ(s.dtype(), DType::bf16);
  EXPECT_EQ(s.to_vector<float>(),
            add(a.to(DType::f32), b.to(DType::f32)).to(DType::bf16).to_vector<float>());
  // Mixed with f32: promotes to f32.
  EXPECT_EQ(mul(a, b32).dtype(), DType::f32);
  // Reductions accumulate in f32: 4096 ones sum to 4096 (a bf16 accumulator stops at 256).
  Tensor ones_bf = ones({4096}, DType::bf16);
  EXPECT_EQ(sum(ones_bf).to_vector<float>()[0], 4096.0f);
  EXPECT_EQ(sum(ones_bf).dtype(), DType::bf16);
  // A contraction: equal to the f32 matmul of the same values, rounded.
  Tensor w = randn({19, 23}).to(DType::bf16);
  Tensor m = matmul(a, w);
  EXPECT_EQ(m.dtype(), DType::bf16);
  std::vector<float> got = m.to_vector<float>();
  std::vector<float> want =
      matmul(a.to(DType::f32), w.to(DType::f32)).to(DType::bf16).to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-2 * (1 + std::fabs(want[i])));
  // In place, through a view: the write lands in the bf16 storage.
  Tensor c = a.clone();
  Tensor row = c.select(0, 3);
  add_(row, full({1}, 1.0));
  std::vector<float> cv = c.to_vector<float>(), av = a.to_vector<float>();
  EXPECT_EQ(cv[3 * 19 + 2], float(BFloat16(av[3 * 19 + 2] + 1.0f)));
  EXPECT_EQ(cv[2 * 19 + 2], av[2 * 19 + 2]);
  EXPECT_EQ(c.dtype(), DType::bf16);
}

TEST(Half, Autograd) {
  manual_seed(9);
  Tensor x = randn({4, 5}).to(DType::bf16).set_requires_grad(true);
  Tensor y = sum(mul(x, x));
  y.backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().dtype(), DType::bf16);
  std::vector<float> g = x.grad().to_vector<float>(), xv = x.to_vector<float>();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i], float(BFloat16(2 * xv[i])));
}
