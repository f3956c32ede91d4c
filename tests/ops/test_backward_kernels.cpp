// The oneDNN backward kernels of conv2d and pooling against the reference loops of
// backward_loops.h (run in f64 on the same random data), over strides, padding, dilation, groups,
// ceil_mode and memory layouts; and the ops' f32 results against their f64 ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <string>

#include "lathe/core/random.h"
#include "lathe/kernels/backward_loops.h"
#include "lathe/kernels/dnnl_common.h"
#include "lathe/kernels/dnnl_conv_backward.h"
#include "lathe/kernels/dnnl_pool_backward.h"
#include "lathe/ops/backward_ops.h"
#include "lathe/ops/ops.h"

namespace lathe {
namespace {

using detail::to_channels_last_copy;
using Ints = std::vector<int64_t>;

Shape shape_of(const Ints& s) { return to_shape(s); }
std::string ints(const Ints& v) {
  std::ostringstream os;
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "[") << v[i];
  os << "]";
  return os.str();
}

// Worst relative error (floored at 1 in the denominator) of got against ref, logical order.
double worst_error(const Tensor& got, const Tensor& ref) {
  EXPECT_EQ(got.shape(), ref.shape());
  auto g = got.to_vector<double>(), r = ref.to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    double err = std::abs(g[i] - r[i]) / std::max(1.0, std::abs(r[i]));
    if (!(err <= worst)) worst = err;
  }
  return worst;
}

struct ConvCase {
  Ints x;  // N, C, H, W
  int64_t O, KH, KW;
  detail::Conv2dParams p;
};

detail::Conv2dParams conv_params(Ints stride, Ints pad, Ints dil, int64_t groups) {
  detail::Conv2dParams p;
  for (int i = 0; i < 2; ++i) {
    p.stride[i] = stride[i];
    p.padding[i] = pad[i];
    p.dilation[i] = dil[i];
  }
  p.groups = groups;
  return p;
}

Ints conv_out(const ConvCase& c) {
  Ints o{c.x[0], c.O, 0, 0};
  const int64_t k[2] = {c.KH, c.KW};
  for (int i = 0; i < 2; ++i)
    o[2 + i] =
        (c.x[2 + i] + 2 * c.p.padding[i] - c.p.dilation[i] * (k[i] - 1) - 1) / c.p.stride[i] + 1;
  return o;
}

std::vector<ConvCase> conv_cases() {
  return {
      {{2, 3, 9, 11}, 8, 3, 3, conv_params({1, 1}, {1, 1}, {1, 1}, 1)},
      {{2, 16, 14, 14}, 32, 3, 3, conv_params({2, 2}, {1, 1}, {1, 1}, 1)},
      {{1, 8, 12, 10}, 8, 3, 2, conv_params({2, 1}, {2, 0}, {2, 3}, 1)},
      {{2, 16, 10, 10}, 16, 3, 3, conv_params({1, 1}, {1, 1}, {1, 1}, 16)},  // depthwise
      {{2, 16, 9, 9}, 32, 3, 3, conv_params({2, 2}, {1, 1}, {1, 1}, 4)},     // 4 per group
      {{3, 12, 8, 8}, 6, 1, 1, conv_params({1, 1}, {0, 0}, {1, 1}, 3)},
      {{2, 3, 17, 17}, 8, 7, 7, conv_params({2, 2}, {3, 3}, {1, 1}, 1)},  // resnet stem-like
  };
}

std::string describe(const ConvCase& c) {
  return detail::str("x ", ints(c.x), " O ", c.O, " k ", c.KH, "x", c.KW, " stride ", c.p.stride[0],
                     ",", c.p.stride[1], " pad ", c.p.padding[0], ",", c.p.padding[1], " dil ",
                     c.p.dilation[0], ",", c.p.dilation[1], " groups ", c.p.groups);
}

TEST(BackwardKernels, ConvInputGradMatchesReferenceLoops) {
  manual_seed(11);
  for (const ConvCase& c : conv_cases()) {
    Tensor go = randn(shape_of(conv_out(c)));
    Tensor w = randn({c.O, c.x[1] / c.p.groups, c.KH, c.KW});
    Tensor ref = empty(shape_of(c.x), DType::f64);
    detail::conv2d_backward_input(go.to(DType::f64), w.to(DType::f64), c.p, ref);
    for (bool go_cl : {false, true}) {
      for (bool gi_cl : {false, true}) {
        Tensor gi = gi_cl ? to_channels_last_copy(empty(shape_of(c.x))) : empty(shape_of(c.x));
        detail::conv2d_backward_input_dnnl(go_cl ? to_channels_last_copy(go) : go, w, c.p, gi);
        EXPECT_LE(worst_error(gi, ref), 1e-4) << describe(c) << " grad_out channels-last " << go_cl
                                              << " grad_input channels-last " << gi_cl;
      }
    }
  }
}

TEST(BackwardKernels, ConvWeightGradMatchesReferenceLoops) {
  manual_seed(12);
  for (const ConvCase& c : conv_cases()) {
    Tensor go = randn(shape_of(conv_out(c)));
    Tensor x = randn(shape_of(c.x));
    Ints ws{c.O, c.x[1] / c.p.groups, c.KH, c.KW};
    Tensor ref = empty(shape_of(ws), DType::f64);
    detail::conv2d_backward_weight(go.to(DType::f64), x.to(DType::f64), c.p, ref);
    for (bool cl : {false, true}) {
      Tensor gw = empty(shape_of(ws));
      detail::conv2d_backward_weight_dnnl(cl ? to_channels_last_copy(go) : go,
                                          cl ? to_channels_last_copy(x) : x, c.p, gw);
      EXPECT_LE(worst_error(gw, ref), 1e-4) << describe(c) << " channels-last " << cl;
    }
  }
}

struct PoolCase {
  Ints x;
  detail::Pool2dParams p;
};

detail::Pool2dParams pool_params(Ints k, Ints s, Ints pad, Ints dil, bool ceil, bool include) {
  detail::Pool2dParams p;
  for (int i = 0; i < 2; ++i) {
    p.kernel[i] = k[i];
    p.stride[i] = s[i];
    p.padding[i] = pad[i];
    p.dilation[i] = dil[i];
  }
  p.ceil_mode = ceil;
  p.count_include_pad = include;
  return p;
}

// PyTorch's pooling output size along one dim.
int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t pad, int64_t d, bool ceil) {
  const int64_t span = in + 2 * pad - d * (k - 1) - 1;
  int64_t o = (ceil ? (span + s - 1) / s : span / s) + 1;
  if (ceil && (o - 1) * s >= in + pad) --o;
  return o;
}

Ints pool_out_shape(const PoolCase& c) {
  Ints o = c.x;
  for (int i = 0; i < 2; ++i)
    o[2 + i] = pool_out(c.x[2 + i], c.p.kernel[i], c.p.stride[i], c.p.padding[i], c.p.dilation[i],
                        c.p.ceil_mode);
  return o;
}

std::vector<PoolCase> pool_cases() {
  return {
      {{2, 8, 16, 16}, pool_params({3, 3}, {2, 2}, {1, 1}, {1, 1}, false, true)},  // resnet
      {{2, 5, 13, 11}, pool_params({3, 2}, {2, 2}, {0, 1}, {1, 1}, true, true)},
      {{1, 4, 12, 12}, pool_params({2, 2}, {2, 2}, {0, 0}, {1, 1}, false, false)},
      {{2, 3, 15, 15}, pool_params({3, 3}, {2, 2}, {1, 1}, {1, 1}, true, false)},
      {{1, 6, 14, 14}, pool_params({3, 3}, {1, 1}, {1, 1}, {2, 2}, false, true)},  // dilated
  };
}

TEST(BackwardKernels, MaxPoolGradMatchesReferenceLoops) {
  manual_seed(13);
  for (const PoolCase& c : pool_cases()) {
    Tensor x = randn(shape_of(c.x));
    Tensor go = randn(shape_of(pool_out_shape(c)));
    Tensor ref = empty(shape_of(c.x), DType::f64);
    detail::max_pool2d_backward(go.to(DType::f64), x.to(DType::f64), c.p, ref);
    for (bool cl : {false, true}) {
      Tensor gi = cl ? to_channels_last_copy(empty(shape_of(c.x))) : empty(shape_of(c.x));
      ASSERT_TRUE(detail::max_pool2d_backward_dnnl(go, cl ? to_channels_last_copy(x) : x, c.p, gi))
          << "oneDNN declined max pooling x " << ints(c.x);
      EXPECT_LE(worst_error(gi, ref), 1e-5) << "x " << ints(c.x) << " cl " << cl;
    }
  }
}

TEST(BackwardKernels, MaxPoolGradGoesToTheFirstOfTiedMaxima) {
  // Integer-valued inputs make ties in every window; PyTorch sends the gradient to the first.
  std::mt19937 rng(16);
  std::vector<float> values(3 * 64);
  for (float& v : values) v = static_cast<float>(rng() % 3);
  Tensor x = from_vector(values, {1, 3, 8, 8});
  PoolCase c{{1, 3, 8, 8}, pool_params({3, 3}, {1, 1}, {1, 1}, {1, 1}, false, true)};
  Tensor go = randn(shape_of(pool_out_shape(c)));
  Tensor ref = empty({1, 3, 8, 8}, DType::f64);
  detail::max_pool2d_backward(go.to(DType::f64), x.to(DType::f64), c.p, ref);
  Tensor gi = empty({1, 3, 8, 8});
  ASSERT_TRUE(detail::max_pool2d_backward_dnnl(go, x, c.p, gi));
  EXPECT_LE(worst_error(gi, ref), 1e-5);
}

TEST(BackwardKernels, AvgPoolGradMatchesReferenceLoopsOrDeclines) {
  manual_seed(14);
  int ran = 0;
  for (PoolCase c : pool_cases()) {
    c.p.dilation[0] = c.p.dilation[1] = 1;  // avg_pool2d has no dilation
    Tensor go = randn(shape_of(pool_out_shape(c)));
    Tensor ref = empty(shape_of(c.x), DType::f64);
    detail::avg_pool2d_backward(go.to(DType::f64), c.p, ref);
    for (bool cl : {false, true}) {
      Tensor gi = cl ? to_channels_last_copy(empty(shape_of(c.x))) : empty(shape_of(c.x));
      if (!detail::avg_pool2d_backward_dnnl(go, c.p, gi)) continue;
      ++ran;
      EXPECT_LE(worst_error(gi, ref), 1e-5) << "x " << ints(c.x) << " cl " << cl;
    }
  }
  EXPECT_GE(ran, 6);  // all but the clipped ceil_mode case with count_include_pad
}

TEST(BackwardKernels, OpsInF32AgreeWithTheirF64LoopPath) {
  manual_seed(15);
  Tensor x = to_channels_last_copy(randn({2, 8, 10, 10}));
  Tensor w = randn({12, 4, 3, 3});
  Attrs conv{{"stride", to_shape({2, 2})},
             {"padding", to_shape({1, 1})},
             {"dilation", to_shape({1, 1})},
             {"groups", int64_t{2}}};
  Tensor y = conv2d(x, w, Tensor(), {2, 2}, {1, 1}, {1, 1}, 2);
  Tensor go = to_channels_last_copy(randn(y.sizes()));
  Tensor gi = conv2d_backward_input(go, w, x.sizes(), conv);
  Tensor gi64 = conv2d_backward_input(go.to(DType::f64), w.to(DType::f64), x.sizes(), conv);
  EXPECT_TRUE(gi.is_channels_last());
  EXPECT_LE(worst_error(gi, gi64), 1e-4);
  Tensor gw = conv2d_backward_weight(go, x, w.sizes(), conv);
  Tensor gw64 = conv2d_backward_weight(go.to(DType::f64), x.to(DType::f64), w.sizes(), conv);
  EXPECT_LE(worst_error(gw, gw64), 1e-4);

  Attrs pool{{"kernel", to_shape({3, 3})},
             {"stride", to_shape({2, 2})},
             {"padding", to_shape({1, 1})},
             {"dilation", to_shape({1, 1})},
             {"ceil_mode", false}};
  Tensor pooled = max_pool2d(x, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false);
  Tensor gp = to_channels_last_copy(randn(pooled.sizes()));
  Tensor mp = max_pool2d_backward(gp, x, pool);
  Tensor mp64 = max_pool2d_backward(gp.to(DType::f64), x.to(DType::f64), pool);
  EXPECT_TRUE(mp.is_channels_last());
  EXPECT_LE(worst_error(mp, mp64), 1e-5);
}

}  // namespace
}  // namespace lathe
