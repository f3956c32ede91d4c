// The counter-based generator: known answers, determinism across thread counts and layouts,
// stream continuation, and distribution checks.
#include <gtest/gtest.h>

#include <cmath>

#include "lathe/core/random.h"
#include "lathe/core/threads.h"
#include "lathe/ops/ops.h"

using namespace lathe;

// Known-answer vectors of Philox4x32-10 published with the Random123 library.
TEST(Random, PhiloxKnownAnswers) {
  using A = std::array<uint32_t, 4>;
  EXPECT_EQ(philox4x32({0, 0, 0, 0}, 0), (A{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, 0xffffffffffffffffull),
            (A{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                       (uint64_t{0x299f31d0} << 32) | 0xa4093822),
            (A{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Random, SameValuesWhateverTheThreadCount) {
  int saved = num_threads();
  set_num_threads(1);
  Generator g1(42);
  std::vector<float> one = randn({300000}, DType::f32, &g1).to_vector<float>();
  set_num_threads(2);
  Generator g2(42);
  std::vector<float> two = randn({300000}, DType::f32, &g2).to_vector<float>();
  set_num_threads(saved);
  EXPECT_EQ(one, two);
}

TEST(Random, SameLogicalValuesWhateverTheLayout) {
  Generator g1(7), g2(7);
  Tensor plain = empty({2, 3, 40, 50});
  Tensor cl = empty({2, 3, 40, 50}).to_channels_last();
  Tensor tr = empty({50, 40}).transpose(0, 1);  // non-dense order
  Tensor tr_plain = empty({40, 50});
  g1.fill_normal(plain, 0, 1);
  g2.fill_normal(cl, 0, 1);
  EXPECT_TRUE(cl.is_channels_last());
  EXPECT_EQ(plain.to_vector<float>(), cl.to_vector<float>());
  Generator g3(9), g4(9);
  g3.fill_uniform(tr, -1, 1);
  g4.fill_uniform(tr_plain, -1, 1);
  EXPECT_EQ(tr.contiguous().to_vector<float>(), tr_plain.to_vector<float>());
}

TEST(Random, FillsContinueTheStream) {
  Generator a(3), b(3);
  std::vector<double> whole = rand({100000}, DType::f64, &a).to_vector<double>();
  std::vector<double> first = rand({40000}, DType::f64, &b).to_vector<double>();
  std::vector<double> second = rand({60000}, DType::f64, &b).to_vector<double>();
  first.insert(first.end(), second.begin(), second.end());
  EXPECT_EQ(whole, first);
  EXPECT_EQ(a.offset(), 50000u);  // two values per counter
  // Reseeding restarts the stream; another seed gives other numbers.
  b.seed(3);
  EXPECT_EQ(rand({10}, DType::f64, &b).to_vector<double>(),
            std::vector<double>(whole.begin(), whole.begin() + 10));
  Generator c(4);
  EXPECT_NE(rand({10}, DType::f64, &c).to_vector<double>(),
            std::vector<double>(whole.begin(), whole.begin() + 10));
}

TEST(Random, Distributions) {
  Generator g(11);
  const int64_t n = 1 << 20;
  std::vector<double> u = rand({n}, DType::f64, &g).to_vector<double>();
  double mean = 0, lo = 1, hi = 0;
  for (double v : u) {
    mean += v;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  mean /= n;
  EXPECT_NEAR(mean, 0.5, 0.002);  // sd of the mean: 0.29 / 1024
  EXPECT_GE(lo, 0.0);
  EXPECT_LT(hi, 1.0);

  std::vector<double> z = randn({n}, DType::f64, &g).to_vector<double>();
  double m = 0, m2 = 0, m4 = 0;
  for (double v : z) m += v;
  m /= n;
  for (double v : z) {
    m2 += (v - m) * (v - m);
    m4 += std::pow(v - m, 4);
  }
  m2 /= n;
  m4 /= n;
  EXPECT_NEAR(m, 0.0, 0.005);
  EXPECT_NEAR(m2, 1.0, 0.01);
  EXPECT_NEAR(m4 / (m2 * m2), 3.0, 0.05);  // normal kurtosis

  std::vector<int64_t> k = randint(-3, 7, {n}, DType::i64, &g).to_vector<int64_t>();
  std::vector<int64_t> counts(10, 0);
  for (int64_t v : k) {
    ASSERT_GE(v, -3);
    ASSERT_LT(v, 7);
    ++counts[v + 3];
  }
  for (int64_t c : counts) EXPECT_NEAR(static_cast<double>(c) / n, 0.1, 0.003);
}

TEST(Random, ScalarDrawsAndErrors) {
  Generator g(5);
  for (int i = 0; i < 1000; ++i) {
    double u = g.uniform(2, 3);
    EXPECT_GE(u, 2);
    EXPECT_LT(u, 3);
    int64_t r = g.randint(10, 12);
    EXPECT_TRUE(r == 10 || r == 11);
  }
  EXPECT_EQ(g.offset(), 2000u);
  EXPECT_THROW(g.randint(3, 3), Error);
  EXPECT_THROW(randint(5, 1, {2}), Error);
  EXPECT_THROW(randn({2}, DType::i64), Error);
}
