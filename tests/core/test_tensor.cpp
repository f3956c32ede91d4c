#include <gtest/gtest.h>

#include "lathe/core/random.h"
#include "lathe/core/tensor.h"
#include "lathe/ops/ops.h"

using namespace lathe;

TEST(Tensor, FactoriesAndMetadata) {
  Tensor t = zeros({2, 3});
  EXPECT_EQ(t.dim(), 2);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t.int_strides(), (std::vector<int64_t>{3, 1}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.shape_string(), "f32[2,3]");
  Tensor a = arange(6);
  EXPECT_EQ(a.dtype(), DType::i64);
  EXPECT_EQ(a.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  Tensor f = full({2}, 2.5, DType::f64);
  EXPECT_EQ(f.to_vector<double>(), (std::vector<double>{2.5, 2.5}));
  EXPECT_THROW(empty({-1, 2}), Error);
}

TEST(Tensor, ViewsShareStorage) {
  Tensor a = arange(0, 12, 1, DType::f32).view({3, 4});
  Tensor t = a.t();
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{4, 3}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.to_vector<float>()[1], 4.0f);
  Tensor s = a.slice(1, 1, 4, 2);  // columns 1 and 3
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{1, 3, 5, 7, 9, 11}));
  Tensor row = a.select(0, 2);
  EXPECT_EQ(row.to_vector<float>(), (std::vector<float>{8, 9, 10, 11}));
  row.fill_(-1);
  EXPECT_EQ(a.to_vector<float>()[8], -1.0f);  // wrote through the view
  Tensor e = arange(0, 3, 1, DType::f32).view({3, 1}).expand({3, 2});
  EXPECT_EQ(e.int_strides(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(e.to_vector<float>(), (std::vector<float>{0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(a.unsqueeze(0).shape(), (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(a.unsqueeze(0).squeeze().shape(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(a.view({-1}).shape(), (std::vector<int64_t>{12}));
  EXPECT_EQ(a.flatten().shape(), (std::vector<int64_t>{12}));
  // A transposed tensor cannot be viewed flat, but reshape copies.
  EXPECT_THROW(t.view({12}), Error);
  EXPECT_EQ(t.reshape({12}).to_vector<float>()[1], 4.0f);
  EXPECT_THROW(a.view({5, -1}), Error);
  EXPECT_THROW(a.permute({0, 0}), Error);
  EXPECT_THROW(a.select(0, 3), Error);
  EXPECT_THROW(a.expand({3, 5}), Error);
}

TEST(Tensor, ChannelsLast) {
  manual_seed(1);
  Tensor x = randn({2, 3, 4, 5});
  Tensor cl = x.to_channels_last();
  EXPECT_TRUE(cl.is_channels_last());
  EXPECT_FALSE(cl.is_contiguous());
  EXPECT_EQ(cl.to_vector<float>(), x.to_vector<float>());
  // Elementwise results keep the channels-last layout.
  Tensor y = relu(cl);
  EXPECT_TRUE(y.is_channels_last());
  EXPECT_EQ(y.contiguous().to_vector<float>(), relu(x).to_vector<float>());
}

TEST(Tensor, PrintIsReadable) {
  Tensor a = arange(0, 4, 1, DType::f32).view({2, 2});
  std::string s = a.to_string();
  EXPECT_NE(s.find("f32[2,2]"), std::string::npos);
  EXPECT_NE(s.find("[[0, 1],"), std::string::npos) << s;
}

TEST(Tensor, PrintShowsEdgesOfLongDimsAndFollowsStrides) {
  EXPECT_EQ(arange(0, 10, 1, DType::i64).to_string(), "Tensor(i64[10],\n [0, 1, 2, ..., 7, 8, 9])");
  Tensor t = arange(0, 6, 1, DType::i64).view({2, 3}).t();  // not contiguous
  EXPECT_EQ(t.to_string(), "Tensor(i64[3,2],\n [[0, 3],\n  [1, 4],\n  [2, 5]])");
  EXPECT_EQ(empty({2, 0}, DType::f32).to_string(), "Tensor(f32[2,0],\n [[],\n  []])");
}

TEST(Tensor, PrintOfAVeryHighRankDoesNotRecurse) {
  // Printing used to recurse once per dim: a rank-100,000 tensor overflowed the stack.
  const size_t rank = 100'000;
  Tensor t = from_vector(std::vector<float>{2.5f}, to_shape(std::vector<int64_t>(rank, 1)));
  EXPECT_EQ(t.to_string(), "Tensor(" + t.shape_string() + ",\n " + std::string(rank, '[') + "2.5" +
                               std::string(rank, ']') + ")");
}

TEST(Tensor, BroadcastAndPromotion) {
  Tensor a = arange(0, 3, 1, DType::i64).view({3, 1});
  Tensor b = full({2}, 0.5, DType::f32);
  Tensor c = add(a, b);
  EXPECT_EQ(c.dtype(), DType::f32);
  EXPECT_EQ(c.shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{0.5, 0.5, 1.5, 1.5, 2.5, 2.5}));
  Tensor d = div(arange(4), 2.0);
  EXPECT_EQ(d.dtype(), DType::f32);
  EXPECT_EQ(mul(arange(4), 2.0).dtype(), DType::i64);
  EXPECT_EQ(mul(arange(4), 2.5).dtype(), DType::f32);
  Tensor cmp = gt(arange(4), 1.0);
  EXPECT_EQ(cmp.dtype(), DType::b8);
  EXPECT_EQ(cmp.to_vector<bool>(), (std::vector<bool>{false, false, true, true}));
  try {
    add(zeros({2, 3}), zeros({4}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[add] shapes [2,3] and [4] do not broadcast"),
              std::string::npos)
        << e.what();
  }
}

TEST(Tensor, InPlaceOpsBumpVersion) {
  Tensor a = zeros({4});
  uint64_t v0 = a.impl().storage->version();
  add_(a, ones({4}), 2.0);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{2, 2, 2, 2}));
  EXPECT_GT(a.impl().storage->version(), v0);
  EXPECT_THROW(add_(a, ones({2, 4})), Error);
}

TEST(Tensor, LargeParallelAdd) {
  manual_seed(3);
  Tensor a = randn({1 << 20});
  Tensor b = randn({1 << 20});
  Tensor c = a + b;
  auto va = a.to_vector<float>(), vb = b.to_vector<float>(), vc = c.to_vector<float>();
  for (size_t i = 0; i < va.size(); i += 9973) EXPECT_EQ(vc[i], va[i] + vb[i]);
}
