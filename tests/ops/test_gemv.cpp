// The streaming GEMV that linear layers with a few rows use (lathe/kernels/gemv.h): every M,
// weight-row and K tail, bias, each post-op, strided outputs, thread-count independence, and the
// shapes it declines (which linear_forward then gives to oneDNN).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "lathe/core/random.h"
#include "lathe/core/threads.h"
#include "lathe/kernels/dnnl_matmul.h"
#include "lathe/kernels/gemv.h"
#include "lathe/ops/ops.h"

namespace lathe {
namespace {

using detail::PostOps;

// post(x @ w^T + b) in double, with `before` the output's prior contents (for post.sum).
std::vector<double> reference(const Tensor& x, const Tensor& w, const Tensor& b,
                              const std::vector<double>& before, const PostOps& post) {
  const int64_t M = x.shape()[0], K = x.shape()[1], N = w.shape()[0];
  auto xv = x.contiguous().to_vector<double>(), wv = w.contiguous().to_vector<double>();
  std::vector<double> bv = b.defined() ? b.to_vector<double>() : std::vector<double>(N, 0.0);
  std::vector<double> ref(M * N);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = bv[n];
      for (int64_t k = 0; k < K; ++k) acc += xv[m * K + k] * wv[n * K + k];
      double v = detail::apply_post_act(acc, post.act, post.act_lo, post.act_hi);
      if (post.sum) v += before[m * N + n];
      ref[m * N + n] = detail::apply_post_act(v, post.act2, post.act2_lo, post.act2_hi);
    }
  return ref;
}

void expect_close(const Tensor& out, const std::vector<double>& ref, const std::string& what) {
  auto got = out.contiguous().to_vector<double>();
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], ref[i], 1e-4 * (1 + std::abs(ref[i]))) << what << " at " << i;
}

TEST(Gemv, MatchesReferenceForEveryRowCountTailAndPostOp) {
  manual_seed(3);
  // N * K * 4 >= 1 MiB so that linear_gemv takes them; N and K with tails of every kind.
  const std::vector<std::pair<int64_t, int64_t>> nks = {{131, 2051}, {1024, 256}, {257, 1027}};
  std::vector<PostOps> posts(5);
  posts[1].act = PostOps::Act::relu;
  posts[2].act = PostOps::Act::clip, posts[2].act_lo = -0.5f, posts[2].act_hi = 0.5f;
  posts[3].act = PostOps::Act::gelu_erf;
  posts[4].sum = true, posts[4].act2 = PostOps::Act::relu;
  for (auto [N, K] : nks) {
    Tensor w = randn({N, K});
    Tensor b = randn({N});
    for (int64_t M = 1; M <= detail::kGemvMaxRows; ++M) {
      Tensor x = randn({M, K});
      for (bool with_bias : {true, false}) {
        for (size_t p = 0; p < posts.size(); ++p) {
          Tensor bias = with_bias ? b : Tensor();
          Tensor out = randn({M, N});
          auto before = out.to_vector<double>();
          ASSERT_TRUE(detail::linear_gemv(x, w, bias, out, posts[p]));
          expect_close(out, reference(x, w, bias, before, posts[p]),
                       "M=" + std::to_string(M) + " N=" + std::to_string(N) +
                           " K=" + std::to_string(K) + " post " + std::to_string(p) +
                           (with_bias ? " bias" : ""));
        }
      }
    }
  }
}

TEST(Gemv, StridedRowsAndOutputs) {
  manual_seed(4);
  const int64_t M = 3, N = 300, K = 1024;
  Tensor wide = randn({N, K + 5});
  Tensor w = wide.slice(1, 2, 2 + K);           // row stride K + 5
  Tensor x = randn({M, K + 9}).slice(1, 0, K);  // row stride K + 9
  Tensor out = randn({N, M}).t();               // column-major output
  Tensor b = randn({2 * N}).slice(0, 0, 2 * N, 2);
  auto before = out.contiguous().to_vector<double>();
  ASSERT_TRUE(detail::linear_gemv(x, w, b, out, PostOps{}));
  expect_close(out, reference(x, w, b, before, PostOps{}), "strided");
}

TEST(Gemv, ResultsDoNotDependOnTheThreadCount) {
  manual_seed(5);
  Tensor w = randn({2048, 512}), x = randn({2, 512}), b = randn({2048});
  const int saved = num_threads();
  set_num_threads(1);
  Tensor one = empty({2, 2048});
  ASSERT_TRUE(detail::linear_gemv(x, w, b, one, PostOps{}));
  set_num_threads(2);
  Tensor two = empty({2, 2048});
  ASSERT_TRUE(detail::linear_gemv(x, w, b, two, PostOps{}));
  set_num_threads(saved);
  EXPECT_EQ(one.to_vector<float>(), two.to_vector<float>());
}

TEST(Gemv, DeclinesShapesItDoesNotSuit) {
  Tensor out = empty({5, 1024});
  // Too many rows, a small weight, a transposed weight, f64: linear_forward uses oneDNN.
  EXPECT_FALSE(detail::linear_gemv(randn({5, 512}), randn({1024, 512}), Tensor(), out, {}));
  Tensor small_out = empty({1, 16});
  EXPECT_FALSE(detail::linear_gemv(randn({1, 64}), randn({16, 64}), Tensor(), small_out, {}));
  Tensor o1 = empty({1, 1024});
  EXPECT_FALSE(detail::linear_gemv(randn({1, 512}), randn({512, 1024}).t(), Tensor(), o1, {}));
  Tensor o64 = empty({1, 1024}, DType::f64);
  EXPECT_FALSE(detail::linear_gemv(randn({1, 512}, DType::f64), randn({1024, 512}, DType::f64),
                                   Tensor(), o64, {}));
}

TEST(Gemv, LinearOpAtBatchOneMatchesTheOneDnnPathAtBatchEight) {
  // The same rows through linear() at M = 1 (GEMV) and inside M = 8 (oneDNN): equal to rounding.
  manual_seed(6);
  Tensor w = randn({1000, 1280}), b = randn({1000}), x8 = randn({8, 1280});
  Tensor y8 = linear(x8, w, b);
  for (int64_t m = 0; m < 8; ++m) {
    Tensor y1 = linear(x8.slice(0, m, m + 1), w, b);
    auto a = y1.to_vector<double>(), e = y8.slice(0, m, m + 1).contiguous().to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], e[i], 1e-3) << "row " << m;
  }
}

}  // namespace
}  // namespace lathe
