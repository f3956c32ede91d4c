#include <gtest/gtest.h>

#include <cmath>

#include "lathe/core/random.h"
#include "lathe/ops/ops.h"

using namespace lathe;

TEST(Reductions, SumMeanMaxArgmax) {
  Tensor a = arange(0, 6, 1, DType::f32).view({2, 3});
  EXPECT_EQ(sum(a).item(), 15.0);
  EXPECT_EQ(sum(a, {1}).to_vector<float>(), (std::vector<float>{3, 12}));
  EXPECT_EQ(sum(a, {0}, true).shape(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(mean(a, {-1}).to_vector<float>(), (std::vector<float>{1, 4}));
  EXPECT_EQ(amax(a, {0}).to_vector<float>(), (std::vector<float>{3, 4, 5}));
  EXPECT_EQ(argmax(a, 1).to_vector<int64_t>(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(argmin(a.t(), 0).to_vector<int64_t>(), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(sum(arange(4)).dtype(), DType::i64);
  EXPECT_NEAR(var(a, {1}).to_vector<float>()[0], 1.0, 1e-6);
  EXPECT_NEAR(std_dev(a, {1}, 0).to_vector<float>()[0], std::sqrt(2.0 / 3.0), 1e-6);
  EXPECT_THROW(mean(arange(4)), Error);
  EXPECT_THROW(amax(zeros({0, 3}), {0}), Error);
  EXPECT_THROW(sum(a, {2}), Error);
}

TEST(NnOps, SoftmaxRowsSumToOne) {
  manual_seed(0);
  Tensor x = randn({3, 5});
  for (int64_t d : {0, 1}) {
    Tensor s = softmax(x, d);
    auto tot = sum(s, {d}).to_vector<float>();
    for (float v : tot) EXPECT_NEAR(v, 1.0f, 1e-6);
    Tensor ls = log_softmax(x, d);
    auto e = exp(ls).to_vector<float>();
    auto sv = s.to_vector<float>();
    for (size_t i = 0; i < e.size(); ++i) EXPECT_NEAR(e[i], sv[i], 1e-6);
  }
}

TEST(NnOps, BatchNormTrainUpdatesRunningStats) {
  manual_seed(0);
  Tensor x = randn({4, 3, 5, 5});
  Tensor rm = zeros({3}), rv = ones({3});
  Tensor y = batch_norm(x, rm, rv, ones({3}), zeros({3}), true, 0.1, 1e-5);
  // Output has zero mean and unit (biased) variance per channel.
  auto m = mean(y, {0, 2, 3}).to_vector<float>();
  auto v = var(y, {0, 2, 3}, 0).to_vector<float>();
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(m[c], 0.0, 1e-5);
    EXPECT_NEAR(v[c], 1.0, 1e-3);
  }
  auto bm = mean(x, {0, 2, 3}).to_vector<float>();
  auto bv = var(x, {0, 2, 3}, 1).to_vector<float>();
  auto rmv = rm.to_vector<float>(), rvv = rv.to_vector<float>();
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(rmv[c], 0.1 * bm[c], 1e-6);
    EXPECT_NEAR(rvv[c], 0.9 + 0.1 * bv[c], 1e-6);
  }
  // Eval with the channels-last layout keeps the layout.
  Tensor xc = x.to_channels_last();
  Tensor ye = batch_norm(xc, rm, rv, Tensor(), Tensor(), false, 0.1, 1e-5);
  EXPECT_TRUE(ye.is_channels_last());
  EXPECT_THROW(batch_norm(x, zeros({4}), ones({4}), {}, {}, false, 0.1, 1e-5), Error);
}

TEST(NnOps, LayerNormEmbeddingLoss) {
  manual_seed(0);
  Tensor x = randn({2, 4, 6});
  Tensor y = layer_norm(x, {6});
  auto m = mean(y, {-1}).to_vector<float>();
  for (float v : m) EXPECT_NEAR(v, 0.0f, 1e-5);
  Tensor w = randn({10, 3});
  Tensor e = embedding(w, from_vector<int64_t>({9, 0, 9}, {3}));
  EXPECT_EQ(e.shape(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(e.select(0, 0).to_vector<float>(), w.select(0, 9).to_vector<float>());
  EXPECT_THROW(embedding(w, from_vector<int64_t>({10}, {1})), Error);
  Tensor logits = from_vector<float>({0, 0, 0, 0}, {2, 2});
  Tensor loss = cross_entropy(logits, from_vector<int64_t>({0, 1}, {2}));
  EXPECT_NEAR(loss.item(), std::log(2.0), 1e-6);
  Tensor cat2 = cat({ones({2, 1}), zeros({2, 2})}, 1);
  EXPECT_EQ(cat2.to_vector<float>(), (std::vector<float>{1, 0, 0, 1, 0, 0}));
  EXPECT_EQ(stack({ones({2}), zeros({2})}, 1).shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_THROW(cat({ones({2, 1}), zeros({3, 2})}, 1), Error);
}

TEST(NnOps, DropoutTrainScalesAndZeroes) {
  manual_seed(0);
  Tensor x = ones({10000});
  Tensor y = dropout(x, 0.25, true);
  auto v = y.to_vector<float>();
  int zeros_count = 0;
  for (float f : v) {
    if (f == 0)
      ++zeros_count;
    else
      EXPECT_NEAR(f, 1.0 / 0.75, 1e-6);
  }
  EXPECT_NEAR(zeros_count / 10000.0, 0.25, 0.03);
  EXPECT_TRUE(dropout(x, 0.5, false).is_same(x));
}
