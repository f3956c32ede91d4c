// The training batch norm's own kernels (lathe/kernels/batch_norm.h) through the batch_norm and
// batch_norm_backward ops: every layout the kernels take (row-major, channels innermost) and the
// ones they copy (other strides, a gradient in another layout than the input), against the same
// arithmetic composed of f64 ops; and the same bits whatever the thread count.
#include <gtest/gtest.h>

#include "lathe/core/random.h"
#include "lathe/core/threads.h"
#include "lathe/ops/backward_ops.h"
#include "lathe/ops/ops.h"

using namespace lathe;

namespace {

double max_abs_diff(const Tensor& a, const Tensor& b) {
  return amax(abs(sub(a.to(DType::f64), b.to(DType::f64)))).item();
}

std::vector<int64_t> reduce_dims(const Tensor& x) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

// y = (x - mean) * rstd * w + b with the batch statistics, in f64.
Tensor composed_forward(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor xd = x.to(DType::f64);
  const std::vector<int64_t> dims = reduce_dims(x);
  Shape channel(x.dim(), 1);
  channel[1] = x.sizes()[1];
  Tensor xhat = mul(sub(xd, mean(xd, dims, true)), rsqrt(add(var(xd, dims, 0, true), 1e-5)));
  return add(mul(xhat, w.to(DType::f64).reshape(channel)), b.to(DType::f64).reshape(channel));
}

// The gradients of (x, w, b) for grad_out g, in f64.
std::vector<Tensor> composed_backward(const Tensor& g, const Tensor& x, const Tensor& w) {
  Tensor xd = x.to(DType::f64), gd = g.to(DType::f64);
  const std::vector<int64_t> dims = reduce_dims(x);
  Shape channel(x.dim(), 1);
  channel[1] = x.sizes()[1];
  Tensor rstd = rsqrt(add(var(xd, dims, 0, true), 1e-5));
  Tensor xhat = mul(sub(xd, mean(xd, dims, true)), rstd);
  Tensor gxhat = w.defined() ? mul(gd, w.to(DType::f64).reshape(channel)) : gd;
  Tensor gx = mul(rstd, sub(sub(gxhat, mean(gxhat, dims, true)),
                            mul(xhat, mean(mul(gxhat, xhat), dims, true))));
  return {gx, sum(mul(gd, xhat), dims), sum(gd, dims)};
}

struct Layouts {
  const char* name;
  Tensor x, g;
};

// x and grad_out of `sizes` in each layout the kernels meet.
std::vector<Layouts> layouts(const Shape& sizes, DType dt, uint64_t seed) {
  manual_seed(seed);
  Tensor x = add(mul(randn(sizes, dt), 2.0), 0.5), g = randn(sizes, dt);
  std::vector<Layouts> r{{"row-major", x, g}};
  if (sizes.size() == 4) {
    r.push_back({"channels-last", x.to_channels_last(), g.to_channels_last()});
    r.push_back({"channels-last x, row-major g", x.to_channels_last(), g});
    r.push_back({"row-major x, channels-last g", x, g.to_channels_last()});
    // Not dense: every other column of a wider tensor.
    Shape wide = sizes;
    wide[3] = wide[3] * 2;
    Tensor xs = randn(wide, dt).slice(3, 0, wide[3].expect_int(), 2);
    r.push_back({"strided slice", xs, g});
  }
  return r;
}

}  // namespace

TEST(BatchNormKernels, BackwardMatchesTheComposedGradientInEveryLayout) {
  // 24570 elements: more than one block of rows in the channels-innermost form; 9 * 13 and 11
  // leave a remainder after the 8-lane loop of the row-major form.
  const std::vector<Shape> shapes{{3, 70, 9, 13}, {2, 5, 11}, {40, 6}};
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f32 ? 2e-4 : 1e-10;
    for (const Shape& s : shapes) {
      for (const Layouts& l : layouts(s, dt, 7)) {
        for (bool affine : {true, false}) {
          SCOPED_TRACE(std::string(l.name) + (affine ? " affine " : " no weight ") +
                       dtype_name(dt) + " " + l.x.shape_string());
          Tensor w = affine ? randn({s[1]}, dt) : Tensor();
          std::vector<Tensor> got = batch_norm_backward(l.g, l.x, w, 1e-5);
          std::vector<Tensor> want = composed_backward(l.g, l.x, w);
          ASSERT_EQ(got.size(), 3u);
          EXPECT_EQ(got[0].shape(), l.x.shape());
          EXPECT_EQ(got[0].dtype(), dt);
          EXPECT_LT(max_abs_diff(got[0], want[0]), tol);
          EXPECT_LT(max_abs_diff(got[1], want[1]), tol * 100);
          EXPECT_LT(max_abs_diff(got[2], want[2]), tol * 100);
        }
      }
    }
  }
}

TEST(BatchNormKernels, ForwardMatchesTheComposedFormAndKeepsTheLayout) {
  for (const Layouts& l : layouts({3, 70, 9, 13}, DType::f32, 11)) {
    SCOPED_TRACE(l.name);
    Tensor w = randn({70}), b = randn({70});
    Tensor rm = zeros({70}), rv = ones({70});
    Tensor y = batch_norm(l.x, rm, rv, w, b, true, 0.1, 1e-5);
    EXPECT_LT(max_abs_diff(y, composed_forward(l.x, w, b)), 2e-5);
    EXPECT_EQ(y.is_channels_last() && !y.is_contiguous(),
              l.x.is_channels_last() && !l.x.is_contiguous());
    // Running statistics: momentum 0.1 toward the batch mean and unbiased variance.
    Tensor xd = l.x.to(DType::f64);
    EXPECT_LT(max_abs_diff(rm, mul(mean(xd, {0, 2, 3}), 0.1)), 1e-6);
    EXPECT_LT(max_abs_diff(rv, add(mul(var(xd, {0, 2, 3}, 1), 0.1), 0.9)), 1e-5);
  }
}

TEST(BatchNormKernels, SameBitsWithOneOrTwoThreads) {
  const int before = num_threads();
  manual_seed(3);
  for (bool channels_last : {false, true}) {
    Tensor x = randn({4, 32, 40, 40}), g = randn({4, 32, 40, 40}), w = randn({32});
    if (channels_last) {
      x = x.to_channels_last();
      g = g.to_channels_last();
    }
    std::vector<Tensor> runs[2];
    for (int t : {1, 2}) {
      set_num_threads(t);
      Tensor rm = zeros({32}), rv = ones({32});
      runs[t - 1] = batch_norm_backward(g, x, w, 1e-5);
      runs[t - 1].push_back(batch_norm(x, rm, rv, w, {}, true, 0.1, 1e-5));
      runs[t - 1].push_back(rv);
    }
    set_num_threads(before);
    for (size_t i = 0; i < runs[0].size(); ++i)
      EXPECT_EQ(max_abs_diff(runs[0][i], runs[1][i]), 0.0) << "output " << i;
  }
}
