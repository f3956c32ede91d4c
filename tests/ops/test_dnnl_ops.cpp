// conv2d, linear, matmul and pooling against naive double-precision loops on random data, over
// many configurations and memory layouts, plus every validation error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <thread>

#include "lathe/core/random.h"
#include "lathe/core/threads.h"
#include "lathe/kernels/dnnl_common.h"
#include "lathe/ops/ops.h"

namespace lathe {

namespace {

using detail::to_channels_last_copy;
using Vec = std::vector<double>;
using Ints = std::vector<int64_t>;

enum class Layout { contiguous, channels_last, strided };
const char* layout_name(Layout l) {
  return l == Layout::contiguous      ? "contiguous"
         : l == Layout::channels_last ? "channels_last"
                                      : "strided";
}

// A random 4-d tensor in the given memory layout (strided: a W-sliced view of a wider tensor,
// with every other channel, so no dim is dense).
Tensor random4d(const Ints& s, Layout l, DType dt = DType::f32) {
  if (l == Layout::contiguous) return randn(to_shape(s), dt);
  if (l == Layout::channels_last) return to_channels_last_copy(randn(to_shape(s), dt));
  Tensor big = randn({s[0], 2 * s[1], s[2], s[3] + 3}, dt);
  Tensor v = big.slice(1, 0, 2 * s[1], 2).slice(3, 1, 1 + s[3]);
  EXPECT_FALSE(v.is_contiguous());
  EXPECT_FALSE(v.is_channels_last());
  return v;
}

void expect_close(const Tensor& got, const Vec& ref, const Ints& shape, const std::string& what) {
  ASSERT_EQ(got.shape(), shape) << what;
  Vec g = got.to_vector<double>();
  ASSERT_EQ(g.size(), ref.size()) << what;
  double worst = 0;
  size_t worst_i = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    double err = std::abs(g[i] - ref[i]) / std::max(1.0, std::abs(ref[i]));
    if (!(err <= worst)) {
      worst = err;
      worst_i = i;
    }
  }
  EXPECT_LE(worst, 1e-4) << what << ": element " << worst_i << " got " << g[worst_i] << " expected "
                         << ref[worst_i];
}

// ---- reference loops (double, logical row-major data) ----

struct ConvCfg {
  Ints x;  // N,C,H,W
  int64_t O, KH, KW;
  Ints stride, pad, dil;
  int64_t groups;
  bool bias;
};

Ints conv_out_shape(const ConvCfg& c) {
  int64_t oh = (c.x[2] + 2 * c.pad[0] - c.dil[0] * (c.KH - 1) - 1) / c.stride[0] + 1;
  int64_t ow = (c.x[3] + 2 * c.pad[1] - c.dil[1] * (c.KW - 1) - 1) / c.stride[1] + 1;
  return {c.x[0], c.O, oh, ow};
}

Vec ref_conv(const ConvCfg& c, const Vec& x, const Vec& w, const Vec& b) {
  Ints o = conv_out_shape(c);
  const int64_t N = c.x[0], C = c.x[1], H = c.x[2], W = c.x[3], Cg = C / c.groups,
                Og = c.O / c.groups;
  Vec out(N * c.O * o[2] * o[3]);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oc = 0; oc < c.O; ++oc)
      for (int64_t oh = 0; oh < o[2]; ++oh)
        for (int64_t ow = 0; ow < o[3]; ++ow) {
          double acc = c.bias ? b[oc] : 0.0;
          int64_t g = oc / Og;
          for (int64_t ic = 0; ic < Cg; ++ic)
            for (int64_t kh = 0; kh < c.KH; ++kh)
              for (int64_t kw = 0; kw < c.KW; ++kw) {
                int64_t ih = oh * c.stride[0] - c.pad[0] + kh * c.dil[0];
                int64_t iw = ow * c.stride[1] - c.pad[1] + kw * c.dil[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += x[((n * C + g * Cg + ic) * H + ih) * W + iw] *
                       w[((oc * Cg + ic) * c.KH + kh) * c.KW + kw];
              }
          out[((n * c.O + oc) * o[2] + oh) * o[3] + ow] = acc;
        }
  return out;
}

// Matrix product of row-major [B..., M, K] x [B..., K, N] given explicit broadcast shapes.
Vec ref_batched_matmul(const Vec& a, const Ints& as, const Vec& b, const Ints& bs,
                       const Ints& batch, int64_t M, int64_t K, int64_t N) {
  int64_t nb = 1;
  for (int64_t s : batch) nb *= s;
  Vec out(nb * M * N);
  auto index = [&](const Ints& shape, int64_t bi) {  // broadcast batch index -> operand batch
    int64_t r = static_cast<int64_t>(shape.size()) - 2, idx = 0, mul = 1, rem = bi;
    for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
      int64_t i = rem % batch[d];
      rem /= batch[d];
      int64_t od = d - (static_cast<int64_t>(batch.size()) - r);
      if (od < 0) continue;
      idx += (shape[od] == 1 ? 0 : i) * mul;
      mul *= shape[od];
    }
    return idx;
  };
  for (int64_t bi = 0; bi < nb; ++bi) {
    int64_t ia = index(as, bi), ib = index(bs, bi);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += a[(ia * M + i) * K + k] * b[(ib * K + k) * N + j];
        out[(bi * M + i) * N + j] = acc;
      }
  }
  return out;
}

struct PoolCfg {
  Ints x;
  Ints k, s, p, d;
  bool ceil;
  bool include_pad;
};

int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
  int64_t o = num / s + 1;
  if (ceil && (o - 1) * s >= in + p) --o;
  return o;
}

Ints pool_shape(const PoolCfg& c) {
  return {c.x[0], c.x[1], pool_out(c.x[2], c.k[0], c.s[0], c.p[0], c.d[0], c.ceil),
          pool_out(c.x[3], c.k[1], c.s[1], c.p[1], c.d[1], c.ceil)};
}

Vec ref_pool(const PoolCfg& c, const Vec& x, bool is_max) {
  Ints o = pool_shape(c);
  const int64_t H = c.x[2], W = c.x[3];
  Vec out;
  for (int64_t nc = 0; nc < c.x[0] * c.x[1]; ++nc)
    for (int64_t oh = 0; oh < o[2]; ++oh)
      for (int64_t ow = 0; ow < o[3]; ++ow) {
        int64_t h0 = oh * c.s[0] - c.p[0], w0 = ow * c.s[1] - c.p[1];
        if (is_max) {
          double m = -std::numeric_limits<double>::infinity();
          for (int64_t i = 0; i < c.k[0]; ++i)
            for (int64_t j = 0; j < c.k[1]; ++j) {
              int64_t ih = h0 + i * c.d[0], iw = w0 + j * c.d[1];
              if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                m = std::max(m, x[(nc * H + ih) * W + iw]);
            }
          out.push_back(m);
        } else {
          int64_t h1 = std::min(h0 + c.k[0], H + c.p[0]), w1 = std::min(w0 + c.k[1], W + c.p[1]);
          int64_t pool_size = (h1 - h0) * (w1 - w0);
          double sum = 0;
          int64_t count = 0;
          for (int64_t ih = std::max<int64_t>(h0, 0); ih < std::min(h1, H); ++ih)
            for (int64_t iw = std::max<int64_t>(w0, 0); iw < std::min(w1, W); ++iw) {
              sum += x[(nc * H + ih) * W + iw];
              ++count;
            }
          out.push_back(sum / static_cast<double>(c.include_pad ? pool_size : count));
        }
      }
  return out;
}

Vec ref_adaptive(const Ints& xs, const Vec& x, int64_t oh_n, int64_t ow_n) {
  const int64_t H = xs[2], W = xs[3];
  Vec out;
  for (int64_t nc = 0; nc < xs[0] * xs[1]; ++nc)
    for (int64_t oh = 0; oh < oh_n; ++oh)
      for (int64_t ow = 0; ow < ow_n; ++ow) {
        int64_t h0 = oh * H / oh_n, h1 = ((oh + 1) * H + oh_n - 1) / oh_n;
        int64_t w0 = ow * W / ow_n, w1 = ((ow + 1) * W + ow_n - 1) / ow_n;
        double sum = 0;
        for (int64_t i = h0; i < h1; ++i)
          for (int64_t j = w0; j < w1; ++j) sum += x[(nc * H + i) * W + j];
        out.push_back(sum / static_cast<double>((h1 - h0) * (w1 - w0)));
      }
  return out;
}

void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing '" << parts[0] << "'";
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg;
  }
}

const Layout kLayouts[] = {Layout::contiguous, Layout::channels_last, Layout::strided};

// ---- conv2d ----

std::vector<ConvCfg> conv_configs() {
  return {
      {{1, 3, 8, 8}, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
      {{3, 8, 9, 7}, 6, 3, 3, {2, 2}, {1, 1}, {1, 1}, 2, true},       // grouped, stride 2
      {{1, 16, 10, 10}, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 16, true},  // depthwise
      {{2, 8, 5, 6}, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 8, false},     // depthwise x2
      {{2, 6, 11, 11}, 12, 3, 3, {1, 1}, {2, 2}, {2, 2}, 3, true},    // dilated, grouped
      {{1, 32, 7, 7}, 16, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},     // 1x1
      {{3, 64, 6, 6}, 24, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1, false},    // 1x1 stride 2
      {{1, 3, 32, 32}, 8, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1, true},     // 7x7 s2 stem
      {{3, 4, 5, 5}, 5, 5, 5, {1, 1}, {0, 0}, {1, 1}, 1, true},       // output 1x1
      {{1, 4, 6, 8}, 4, 2, 3, {2, 1}, {0, 1}, {1, 2}, 1, true},       // rectangular
      {{2, 5, 4, 4}, 7, 3, 3, {3, 3}, {2, 2}, {1, 1}, 1, false},      // big pad, stride 3
  };
}

TEST(DnnlConv2d, MatchesReferenceAcrossConfigsAndLayouts) {
  manual_seed(1);
  int idx = 0;
  for (const ConvCfg& c : conv_configs()) {
    Tensor w = randn({c.O, c.x[1] / c.groups, c.KH, c.KW});
    Tensor b = c.bias ? randn({c.O}) : Tensor();
    Vec wv = w.to_vector<double>(), bv = c.bias ? b.to_vector<double>() : Vec();
    for (Layout l : kLayouts) {
      Tensor x = random4d(c.x, l);
      Tensor y = conv2d(x, w, b, c.stride, c.pad, c.dil, c.groups);
      std::string what = "conv config " + std::to_string(idx) + " " + layout_name(l);
      expect_close(y, ref_conv(c, x.to_vector<double>(), wv, bv), conv_out_shape(c), what);
      EXPECT_TRUE(y.is_channels_last()) << what;
    }
    ++idx;
  }
}

TEST(DnnlConv2d, F64DirectLoopMatchesReference) {
  manual_seed(2);
  for (const ConvCfg& c : conv_configs()) {
    Tensor w = randn({c.O, c.x[1] / c.groups, c.KH, c.KW}, DType::f64);
    Tensor b = c.bias ? randn({c.O}, DType::f64) : Tensor();
    for (Layout l : {Layout::contiguous, Layout::strided}) {
      Tensor x = random4d(c.x, l, DType::f64);
      Tensor y = conv2d(x, w, b, c.stride, c.pad, c.dil, c.groups);
      EXPECT_EQ(y.dtype(), DType::f64);
      Vec ref = ref_conv(c, x.to_vector<double>(), w.to_vector<double>(),
                         c.bias ? b.to_vector<double>() : Vec());
      Vec got = y.to_vector<double>();
      for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-10);
    }
  }
}

TEST(DnnlConv2d, UnbatchedInputAndStridedWeight) {
  manual_seed(3);
  ConvCfg c{{1, 6, 9, 9}, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, true};
  // Weight as a permuted view (not contiguous), bias as a strided view.
  Tensor w = randn({3, 3, 3, 4}).permute({3, 2, 0, 1});
  ASSERT_FALSE(w.is_contiguous());
  Tensor b = randn({8}).slice(0, 0, 8, 2);
  Tensor x3 = randn({6, 9, 9});
  Tensor y = conv2d(x3, w, b, {1, 1}, {1, 1}, {1, 1}, 2);
  Ints shape = conv_out_shape(c);
  expect_close(y, ref_conv(c, x3.to_vector<double>(), w.to_vector<double>(), b.to_vector<double>()),
               {shape[1], shape[2], shape[3]}, "unbatched conv");
}

TEST(DnnlConv2d, SingleIntAttributesApplyToBothDims) {
  manual_seed(4);
  ConvCfg c{{1, 4, 9, 9}, 4, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, false};
  Tensor x = random4d(c.x, Layout::channels_last);
  Tensor w = randn({4, 4, 3, 3});
  Tensor y = conv2d(x, w, {}, {2}, {1}, {1}, 1);
  expect_close(y, ref_conv(c, x.to_vector<double>(), w.to_vector<double>(), {}), conv_out_shape(c),
               "single-int attrs");
}

TEST(DnnlConv2d, ReorderedWeightIsCachedAndRefreshedOnVersionBump) {
  manual_seed(5);
  ConvCfg c{{1, 16, 8, 8}, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true};
  Tensor x = random4d(c.x, Layout::channels_last);
  Tensor w = randn({16, 16, 3, 3});
  Tensor b = randn({16});
  Tensor y1 = conv2d(x, w, b, {1, 1}, {1, 1}, {1, 1}, 1);
  uint64_t reorders = detail::dnnl_weight_reorder_count();
  size_t primitives = detail::dnnl_primitive_cache_size();
  Tensor y2 = conv2d(x, w, b, {1, 1}, {1, 1}, {1, 1}, 1);
  EXPECT_EQ(detail::dnnl_weight_reorder_count(), reorders) << "second call reordered again";
  EXPECT_EQ(detail::dnnl_primitive_cache_size(), primitives) << "second call made a primitive";
  EXPECT_EQ(y1.to_vector<float>(), y2.to_vector<float>());

  // An in-place write that bumps the version must be seen.
  float* wp = w.data<float>();
  for (int64_t i = 0; i < w.numel(); ++i) wp[i] *= -2.0f;
  w.bump_version();
  Tensor y3 = conv2d(x, w, b, {1, 1}, {1, 1}, {1, 1}, 1);
  expect_close(y3, ref_conv(c, x.to_vector<double>(), w.to_vector<double>(), b.to_vector<double>()),
               conv_out_shape(c), "after weight update");

  // When the weight's storage goes away its cached reorder is dropped.
  size_t before = detail::dnnl_weight_cache_size();
  w = Tensor();
  EXPECT_LT(detail::dnnl_weight_cache_size(), before);
}

TEST(DnnlConv2d, RunsOnEachThreadCount) {
  manual_seed(6);
  ConvCfg c{{2, 32, 12, 12}, 32, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true};
  Tensor x = random4d(c.x, Layout::channels_last);
  Tensor w = randn({32, 32, 3, 3});
  Tensor b = randn({32});
  Vec ref = ref_conv(c, x.to_vector<double>(), w.to_vector<double>(), b.to_vector<double>());
  int saved = num_threads();
  for (int t : {1, 2}) {
    set_num_threads(t);
    expect_close(conv2d(x, w, b, {1, 1}, {1, 1}, {1, 1}, 1), ref, conv_out_shape(c),
                 "threads " + std::to_string(t));
  }
  set_num_threads(saved);
}

TEST(DnnlConv2d, BroadcastWeightAndBiasAndEmptyBatch) {
  manual_seed(14);
  ConvCfg c{{2, 4, 6, 6}, 3, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true};
  // Stride-0 (expanded) weight and bias are valid tensors too.
  Tensor w = randn({1, 4, 3, 3}).expand({3, 4, 3, 3});
  Tensor b = randn({1}).expand({3});
  Tensor x = random4d(c.x, Layout::contiguous);
  expect_close(conv2d(x, w, b, {1, 1}, {1, 1}),
               ref_conv(c, x.to_vector<double>(), w.to_vector<double>(), b.to_vector<double>()),
               conv_out_shape(c), "expanded weight");
  Tensor y = conv2d(randn({0, 4, 6, 6}), randn({3, 4, 3, 3}));
  EXPECT_EQ(y.shape(), (Ints{0, 3, 4, 4}));
}

TEST(DnnlConv2d, ConcurrentCallsShareCachesSafely) {
  manual_seed(15);
  ConvCfg c{{1, 16, 10, 10}, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true};
  Tensor x = random4d(c.x, Layout::channels_last);
  Tensor w = randn({16, 16, 3, 3});
  Tensor b = randn({16});
  Vec ref = ref_conv(c, x.to_vector<double>(), w.to_vector<double>(), b.to_vector<double>());
  std::vector<Tensor> results(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) results[t] = conv2d(x, w, b, {1, 1}, {1, 1});
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t)
    expect_close(results[t], ref, conv_out_shape(c), "thread " + std::to_string(t));
}

TEST(DnnlConv2d, RejectsBadInput) {
  Tensor x = randn({1, 3, 8, 8});
  Tensor w = randn({4, 3, 3, 3});
  expect_error([&] { conv2d(randn({3, 8}), w); }, {"[conv2d]", "3-d (C,H,W) or 4-d", "f32[3,8]"});
  expect_error([&] { conv2d(Tensor(), w); }, {"[conv2d] input and weight must be defined"});
  expect_error([&] { conv2d(x, randn({4, 3, 3})); }, {"[conv2d]", "4-d weight", "f32[4,3,3]"});
  expect_error(
      [&] {
        conv2d(x, randn({4, 4, 3, 3}));
      },
      {"[conv2d] input has 3 channels, weight expects 4", "f32[1,3,8,8]", "f32[4,4,3,3]"});
  expect_error(
      [&] {
        conv2d(randn({1, 6, 8, 8}), randn({5, 3, 3, 3}), {}, {1, 1}, {0, 0}, {1, 1}, 2);
      },
      {"[conv2d] out_channels 5 is not divisible by groups 2", "f32[5,3,3,3]"});
  expect_error(
      [&] {
        conv2d(randn({1, 6, 8, 8}), randn({8, 1, 3, 3}), {}, {1, 1}, {0, 0}, {1, 1}, 4);
      },
      {"[conv2d] input channels 6 are not divisible by groups 4", "f32[1,6,8,8]"});
  expect_error(
      [&] {
        conv2d(x, w, {}, {1, 1}, {0, 0}, {1, 1}, 0);
      },
      {"[conv2d] groups must be positive"});
  expect_error([&] { conv2d(x, w, randn({5})); },
               {"[conv2d] bias must be 1-d with 4 elements", "f32[5]"});
  expect_error([&] { conv2d(x, w, randn({2, 2})); }, {"[conv2d] bias", "f32[2,2]"});
  expect_error(
      [&] {
        conv2d(randn({1, 3, 2, 2}), w);
      },
      {"[conv2d] kernel 3x3", "larger than the padded input 2x2", "f32[1,3,2,2]"});
  expect_error(
      [&] {
        conv2d(randn({1, 3, 4, 4}), w, {}, {1, 1}, {0, 0}, {3, 3});
      },
      {"[conv2d] kernel 3x3 (dilation [3,3]) is larger than the padded input 4x4"});
  expect_error([&] { conv2d(x, w, {}, {0, 1}); }, {"[conv2d] stride must be positive", "[0,1]"});
  expect_error(
      [&] {
        conv2d(x, w, {}, {1, 1}, {0, 0}, {1, -1});
      },
      {"[conv2d] dilation must be positive"});
  expect_error(
      [&] {
        conv2d(x, w, {}, {1, 1}, {-1, 0});
      },
      {"[conv2d] padding must be non-negative"});
  expect_error([&] { conv2d(x, w, {}, {1, 1, 1}); }, {"[conv2d] stride must have 1 or 2 values"});
  expect_error(
      [&] {
        conv2d(x, randn({4, 3, 3, 3}, DType::f64));
      },
      {"[conv2d] input and weight dtypes differ", "f32[1,3,8,8]", "f64[4,3,3,3]"});
  expect_error([&] { conv2d(x, w, randn({4}, DType::f64)); },
               {"[conv2d] input and bias dtypes differ"});
  expect_error(
      [&] {
        conv2d(randint(0, 5, {1, 3, 8, 8}), randint(0, 5, {4, 3, 3, 3}));
      },
      {"[conv2d] input dtype i64 is not supported"});
}

// ---- matmul ----

struct MatmulCase {
  Ints a, b;
};

// Expected result shape and reference of torch.matmul on row-major data.
std::pair<Ints, Vec> ref_matmul(const Ints& as, const Vec& a, const Ints& bs, const Vec& b) {
  Ints a2 = as, b2 = bs;
  if (a2.size() == 1) a2.insert(a2.begin(), 1);
  if (b2.size() == 1) b2.push_back(1);
  Ints ba(a2.begin(), a2.end() - 2), bb(b2.begin(), b2.end() - 2);
  size_t n = std::max(ba.size(), bb.size());
  Ints batch(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - ba.size() ? 1 : ba[i - (n - ba.size())];
    int64_t y = i < n - bb.size() ? 1 : bb[i - (n - bb.size())];
    batch[i] = x == 1 ? y : x;
  }
  int64_t M = a2[a2.size() - 2], K = a2.back(), N = b2.back();
  Vec out = ref_batched_matmul(a, a2, b, b2, batch, M, K, N);
  Ints shape = batch;
  if (as.size() > 1) shape.push_back(M);
  if (bs.size() > 1) shape.push_back(N);
  return {shape, out};
}

TEST(DnnlMatmul, MatchesReferenceForRanksAndBroadcasting) {
  manual_seed(7);
  const std::vector<MatmulCase> cases = {
      {{5}, {5}},
      {{3, 5}, {5}},
      {{5}, {5, 4}},
      {{3, 5}, {5, 4}},
      {{2, 3, 5}, {5, 4}},
      {{5}, {2, 5, 4}},
      {{3, 5}, {2, 5, 4}},
      {{2, 3, 5}, {2, 5, 4}},
      {{2, 1, 3, 5}, {4, 5, 6}},
      {{1, 3, 5}, {2, 5, 4}},
      {{2, 3, 1, 3, 5}, {3, 1, 5, 2}},
      {{1, 1}, {1, 1}},
      {{64, 48}, {48, 33}},
      {{3, 0}, {0, 4}},
      {{0, 5}, {5, 2}},
  };
  for (DType dt : {DType::f32, DType::f64}) {
    for (const MatmulCase& c : cases) {
      Tensor a = randn(to_shape(c.a), dt), b = randn(to_shape(c.b), dt);
      auto [shape, ref] = ref_matmul(c.a, a.to_vector<double>(), c.b, b.to_vector<double>());
      Tensor y = matmul(a, b);
      EXPECT_EQ(y.dtype(), dt);
      expect_close(y, ref, shape,
                   "matmul " + Tensor(a).shape_string() + " @ " + Tensor(b).shape_string());
    }
  }
}

TEST(DnnlMatmul, StridedOperandsNeedNoCopyAndStayCorrect) {
  manual_seed(8);
  for (DType dt : {DType::f32, DType::f64}) {
    // Transposed operands (x^T and, as in attention, k^T over a batch).
    Tensor at = randn({5, 3}, dt).t(), bt = randn({4, 5}, dt).t();
    Tensor q = randn({2, 3, 7, 8}, dt), k = randn({2, 3, 6, 8}, dt);
    Tensor kt = k.transpose(-2, -1);
    // Sliced rows/columns, and an expanded (stride 0) batch dim.
    Tensor as = randn({3, 10}, dt).slice(1, 0, 10, 2);
    Tensor bs = randn({9, 4}, dt).slice(0, 1, 6);
    Tensor ae = randn({1, 3, 5}, dt).expand({4, 3, 5});
    Tensor be = randn({4, 5, 2}, dt);
    // Batch dims permuted (not dense).
    Tensor ap = randn({3, 2, 4, 5}, dt).permute({1, 0, 2, 3});
    const std::vector<std::pair<Tensor, Tensor>> pairs = {
        {at, bt},
        {q, kt},
        {as, bs},
        {ae, be},
        {ap, randn({5, 3}, dt)},
        {bt.t(), at.t()},
        {randn({10}, dt).slice(0, 0, 10, 2), randn({5, 3}, dt)},   // strided vector @ matrix
        {randn({3, 5}, dt), randn({15}, dt).slice(0, 0, 15, 3)}};  // matrix @ strided vector
    for (const auto& [a, b] : pairs) {
      auto [shape, ref] =
          ref_matmul(a.shape(), a.to_vector<double>(), b.shape(), b.to_vector<double>());
      expect_close(matmul(a, b), ref, shape,
                   "strided matmul " + a.shape_string() + " @ " + b.shape_string());
    }
  }
}

TEST(DnnlMatmul, RejectsBadInput) {
  expect_error([&] { matmul(randn({3}), Tensor()); }, {"[matmul] both operands must be defined"});
  expect_error(
      [&] {
        matmul(randn({2, 3}), randn({4, 5}));
      },
      {"[matmul] inner dims do not match", "a f32[2,3] has 3 columns", "b f32[4,5] has 4 rows"});
  expect_error([&] { matmul(randn({3}), randn({4})); }, {"[matmul] inner dims do not match"});
  expect_error(
      [&] {
        matmul(randn({2, 3, 4}), randn({3, 4, 5}));
      },
      {"[matmul] batch dims [2] and [3] do not broadcast", "f32[2,3,4]", "f32[3,4,5]"});
  expect_error([&] { matmul(randn({}), randn({3})); },
               {"[matmul] both operands need at least 1 dim", "f32[]"});
  expect_error(
      [&] {
        matmul(randn({2, 3}), randn({3, 2}, DType::f64));
      },
      {"[matmul] a and b dtypes differ", "f32[2,3]", "f64[3,2]"});
  expect_error(
      [&] {
        matmul(randint(0, 3, {2, 3}), randint(0, 3, {3, 2}));
      },
      {"[matmul] a dtype i64 is not supported"});
}

// ---- linear ----

TEST(DnnlLinear, MatchesReference) {
  manual_seed(9);
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor w = randn({6, 8}, dt);
    Tensor b = randn({6}, dt);
    Tensor wt = randn({8, 6}, dt).t();  // weight given as a transposed view
    const std::vector<Tensor> xs = {
        randn({4, 8}, dt),
        randn({2, 3, 8}, dt),
        randn({8}, dt),
        randn({3, 2, 8}, dt).transpose(0, 1),      // leading dims do not collapse
        randn({2, 5, 16}, dt).slice(2, 0, 16, 2),  // strided features
        randn({1, 1, 8}, dt),
        randn({70, 8}, dt),
        randn({16}, dt).slice(0, 0, 16, 2)};  // strided 1-d input
    for (const Tensor& x : xs) {
      for (const Tensor& weight : {w, wt}) {
        for (bool with_bias : {true, false}) {
          Tensor bias = with_bias ? b : Tensor();
          Tensor y = linear(x, weight, bias);
          // Reference: x @ W^T + b over the flattened leading dims.
          Ints xs_shape = x.shape();
          int64_t M = x.numel() / 8;
          Vec xv = x.to_vector<double>(), wv = weight.to_vector<double>(),
              bv = b.to_vector<double>();
          Vec ref(M * 6);
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < 6; ++j) {
              double acc = with_bias ? bv[j] : 0;
              for (int64_t k = 0; k < 8; ++k) acc += xv[i * 8 + k] * wv[j * 8 + k];
              ref[i * 6 + j] = acc;
            }
          Ints shape(xs_shape.begin(), xs_shape.end() - 1);
          shape.push_back(6);
          expect_close(y, ref, shape, "linear " + x.shape_string());
        }
      }
    }
  }
}

TEST(DnnlLinear, RejectsBadInput) {
  Tensor w = randn({6, 8});
  expect_error(
      [&] {
        linear(randn({4, 5}), w);
      },
      {"[linear] input has 5 features, weight expects 8", "f32[4,5]", "f32[6,8]"});
  expect_error([&] { linear(randn({4, 8}), randn({6, 8, 1})); }, {"[linear] weight must be 2-d"});
  expect_error(
      [&] {
        linear(randn({4, 8}), w, randn({5}));
      },
      {"[linear] bias must be 1-d with 6 elements", "f32[5]"});
  expect_error([&] { linear(randn({}), w); }, {"[linear] input must have at least 1 dim"});
  expect_error(
      [&] {
        linear(randn({4, 8}), Tensor());
      },
      {"[linear] input and weight must be defined"});
  expect_error(
      [&] {
        linear(randn({4, 8}), w, randn({6}, DType::f64));
      },
      {"[linear] input and bias dtypes differ", "f64[6]"});
  expect_error(
      [&] {
        linear(randn({4, 8}, DType::f64), w);
      },
      {"[linear] input and weight dtypes differ"});
  expect_error(
      [&] {
        linear(randint(0, 3, {4, 8}), randint(0, 3, {6, 8}));
      },
      {"[linear] input dtype i64 is not supported"});
}

// ---- pooling ----

std::vector<PoolCfg> pool_configs() {
  // x, kernel, stride, padding, dilation, ceil_mode, count_include_pad
  return {
      {{1, 3, 8, 8}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false, true},
      {{2, 4, 8, 8}, {3, 3}, {2, 2}, {0, 0}, {1, 1}, true, true},    // ceil adds a window
      {{1, 5, 7, 7}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false, true},   // floor drops a row
      {{1, 5, 7, 7}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, true, false},   // ceil, exclude pad
      {{3, 2, 10, 10}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true, true},  // ceil past right pad
      {{1, 3, 9, 6}, {3, 2}, {2, 1}, {1, 0}, {1, 1}, false, false},  // rectangular
      {{2, 3, 5, 5}, {5, 5}, {5, 5}, {0, 0}, {1, 1}, false, true},   // output 1x1
      {{1, 4, 6, 6}, {3, 3}, {3, 3}, {1, 1}, {1, 1}, true, true},
      {{1, 16, 11, 11}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false, false},
  };
}

TEST(DnnlPool, MaxPoolMatchesReference) {
  manual_seed(10);
  std::vector<PoolCfg> cfgs = pool_configs();
  cfgs.push_back({{1, 3, 11, 11}, {3, 3}, {1, 1}, {1, 1}, {2, 2}, false, true});  // dilated
  cfgs.push_back({{2, 3, 9, 10}, {3, 2}, {2, 2}, {1, 1}, {2, 3}, true, true});    // dilated, ceil
  for (DType dt : {DType::f32, DType::f64}) {
    int idx = 0;
    for (const PoolCfg& c : cfgs) {
      for (Layout l : kLayouts) {
        Tensor x = random4d(c.x, l, dt);
        Tensor y = max_pool2d(x, c.k, c.s, c.p, c.d, c.ceil);
        std::string what = "max_pool config " + std::to_string(idx) + " " + layout_name(l);
        expect_close(y, ref_pool(c, x.to_vector<double>(), true), pool_shape(c), what);
        if (l == Layout::channels_last) {
          EXPECT_TRUE(y.is_channels_last()) << what;
        }
        if (l != Layout::channels_last) {
          EXPECT_TRUE(y.is_contiguous()) << what;
        }
      }
      ++idx;
    }
  }
}

TEST(DnnlPool, AvgPoolMatchesReference) {
  manual_seed(11);
  for (DType dt : {DType::f32, DType::f64}) {
    int idx = 0;
    for (PoolCfg c : pool_configs()) {
      for (bool include : {true, false}) {
        c.include_pad = include;
        for (Layout l : kLayouts) {
          Tensor x = random4d(c.x, l, dt);
          Tensor y = avg_pool2d(x, c.k, c.s, c.p, c.ceil, c.include_pad);
          std::string what = "avg_pool config " + std::to_string(idx) + " include_pad " +
                             std::to_string(include) + " " + layout_name(l);
          expect_close(y, ref_pool(c, x.to_vector<double>(), false), pool_shape(c), what);
          if (l == Layout::channels_last) {
            EXPECT_TRUE(y.is_channels_last()) << what;
          }
        }
      }
      ++idx;
    }
  }
}

TEST(DnnlPool, DefaultStrideIsKernelAndUnbatchedWorks) {
  manual_seed(12);
  Tensor x = randn({3, 8, 8});
  Tensor y = max_pool2d(x, {2, 2});
  PoolCfg c{{1, 3, 8, 8}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false, true};
  expect_close(y, ref_pool(c, x.to_vector<double>(), true), {3, 4, 4}, "unbatched max_pool");
  Tensor z = avg_pool2d(x, {2});
  expect_close(z, ref_pool(c, x.to_vector<double>(), false), {3, 4, 4}, "unbatched avg_pool");
}

TEST(DnnlPool, AdaptiveAvgPoolMatchesReference) {
  manual_seed(13);
  const std::vector<std::pair<Ints, Ints>> cases = {
      {{2, 3, 7, 7}, {1, 1}}, {{1, 4, 7, 7}, {3, 3}}, {{2, 2, 8, 8}, {2, 4}},
      {{1, 3, 7, 9}, {5, 3}}, {{1, 2, 4, 4}, {6, 6}}, {{3, 8, 14, 14}, {7, 7}}};
  for (DType dt : {DType::f32, DType::f64}) {
    for (const auto& [xs, os] : cases) {
      for (Layout l : kLayouts) {
        Tensor x = random4d(xs, l, dt);
        Tensor y = adaptive_avg_pool2d(x, os);
        expect_close(y, ref_adaptive(xs, x.to_vector<double>(), os[0], os[1]),
                     {xs[0], xs[1], os[0], os[1]},
                     "adaptive " + x.shape_string() + " " + layout_name(l));
        if (l == Layout::channels_last && os[0] * os[1] > 1) {
          EXPECT_TRUE(y.is_channels_last());
        }
      }
    }
  }
}

TEST(DnnlPool, RejectsBadInput) {
  Tensor x = randn({1, 3, 8, 8});
  expect_error([&] { max_pool2d(Tensor(), {2, 2}); }, {"[max_pool2d] input must be defined"});
  expect_error(
      [&] {
        avg_pool2d(x, {2, 2}, {2, 2}, {-1, 0});
      },
      {"[avg_pool2d] padding must be non-negative"});
  expect_error([&] { avg_pool2d(x, {2, 2}, {2, 0}); }, {"[avg_pool2d] stride must be positive"});
  expect_error(
      [&] {
        adaptive_avg_pool2d(randint(0, 3, {1, 3, 4, 4}), {2, 2});
      },
      {"[adaptive_avg_pool2d] input dtype i64 is not supported"});
  expect_error(
      [&] {
        adaptive_avg_pool2d(randn({1, 3, 0, 4}), {2, 2});
      },
      {"[adaptive_avg_pool2d] input has an empty spatial dim", "f32[1,3,0,4]"});
  expect_error(
      [&] {
        adaptive_avg_pool2d(x, {2, 2, 2});
      },
      {"[adaptive_avg_pool2d] output_size must have 1 or 2 values"});
  expect_error(
      [&] {
        max_pool2d(randn({3, 8}), {2, 2});
      },
      {"[max_pool2d] expects a 3-d (C,H,W) or 4-d", "f32[3,8]"});
  expect_error([&] { max_pool2d(x, {0, 2}); }, {"[max_pool2d] kernel size must be positive"});
  expect_error([&] { max_pool2d(x, {2, 2}, {0, 1}); }, {"[max_pool2d] stride must be positive"});
  expect_error(
      [&] {
        max_pool2d(x, {2, 2}, {2, 2}, {0, 0}, {0, 1});
      },
      {"[max_pool2d] dilation must be positive"});
  expect_error(
      [&] {
        max_pool2d(x, {3, 3}, {1, 1}, {2, 2});
      },
      {"[max_pool2d] padding [2,2] must be at most half of the (dilated) kernel size"});
  expect_error(
      [&] {
        avg_pool2d(x, {2, 2}, {1, 1}, {2, 2});
      },
      {"[avg_pool2d] padding [2,2] must be at most half of the kernel size"});
  expect_error(
      [&] {
        max_pool2d(randn({1, 3, 2, 2}), {3, 3});
      },
      {"[max_pool2d] output size is too small", "f32[1,3,2,2]"});
  expect_error(
      [&] {
        avg_pool2d(randint(0, 3, {1, 3, 4, 4}), {2, 2});
      },
      {"[avg_pool2d] input dtype i64 is not supported"});
  expect_error([&] { max_pool2d(x, {2, 2, 2}); }, {"[max_pool2d] kernel must have 1 or 2 values"});
  expect_error(
      [&] {
        adaptive_avg_pool2d(x, {0, 2});
      },
      {"[adaptive_avg_pool2d] output_size must be positive"});
  expect_error(
      [&] {
        adaptive_avg_pool2d(randn({2, 8}), {2, 2});
      },
      {"[adaptive_avg_pool2d] expects a 3-d (C,H,W) or 4-d"});
}

}  // namespace
}  // namespace lathe
