// Layers: parameter names and shapes, torch's default initialization statistics, and forward
// results against naive loops on random data.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "lathe/core/random.h"
#include "lathe/nn/init.h"
#include "lathe/nn/layers.h"
#include "lathe/ops/ops.h"

using namespace lathe;
using namespace lathe::nn;

namespace {

struct Stats {
  double mean = 0, stddev = 0, min = 0, max = 0;
};

Stats stats_of(const Tensor& t) {
  std::vector<double> v = t.to_vector<double>();
  Stats s;
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  double sq = 0;
  for (double x : v) sq += (x - s.mean) * (x - s.mean);
  s.stddev = std::sqrt(sq / double(v.size()));
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  return s;
}

// Uniform(-b, b): all inside, extremes near b, standard deviation b / sqrt(3).
void expect_uniform(const Tensor& t, double b, const char* what) {
  Stats s = stats_of(t);
  EXPECT_GE(s.min, -b) << what;
  EXPECT_LE(s.max, b) << what;
  EXPECT_GT(s.max, 0.9 * b) << what;
  EXPECT_LT(s.min, -0.9 * b) << what;
  EXPECT_NEAR(s.stddev, b / std::sqrt(3.0), 0.05 * b) << what;
  EXPECT_NEAR(s.mean, 0.0, 0.05 * b) << what;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " at " << i;
}

}  // namespace

TEST(Init, FansFollowTorch) {
  EXPECT_EQ(init::fans(empty({64, 3, 7, 7})), std::make_pair(int64_t{147}, int64_t{3136}));
  EXPECT_EQ(init::fans(empty({10, 20})), std::make_pair(int64_t{20}, int64_t{10}));
  EXPECT_THROW(init::fans(empty({5})), Error);
}

TEST(Init, KaimingXavierAndTruncNormalBounds) {
  manual_seed(3);
  Tensor w = empty({256, 64, 3, 3});
  init::kaiming_uniform_(w, 0.0, true);  // relu gain: bound sqrt(6 / fan_in)
  expect_uniform(w, std::sqrt(6.0 / 576), "kaiming_uniform a=0");
  init::kaiming_normal_(w, 0.0, false);  // std sqrt(2 / fan_out)
  EXPECT_NEAR(stats_of(w).stddev, std::sqrt(2.0 / (256 * 9)), 0.02 * std::sqrt(2.0 / (256 * 9)));
  Tensor x = empty({300, 100});
  init::xavier_uniform_(x);
  expect_uniform(x, std::sqrt(6.0 / 400), "xavier_uniform");
  Tensor t = empty({20000});
  init::trunc_normal_(t, 0.0, 1.0, -0.5, 0.5);
  Stats s = stats_of(t);
  EXPECT_GE(s.min, -0.5);
  EXPECT_LE(s.max, 0.5);
  EXPECT_GT(s.max, 0.49);
  init::constant_(t.slice(0, 0, 10, 2), 4.0);  // strided
  EXPECT_EQ(t.select(0, 8).item(), 4.0);
  EXPECT_NE(t.select(0, 9).item(), 4.0);
}

TEST(Conv2d, ParametersAndDefaultInit) {
  manual_seed(4);
  Conv2d conv(Conv2dOptions{16, 64, {3, 5}, {2}, {1, 2}, {1}, 2, true});
  auto p = conv.named_parameters();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].first, "weight");
  EXPECT_EQ(p[0].second.shape(), (std::vector<int64_t>{64, 8, 3, 5}));
  EXPECT_EQ(p[1].first, "bias");
  EXPECT_EQ(p[1].second.shape(), (std::vector<int64_t>{64}));
  // kaiming_uniform_(a=sqrt(5)) is U(-1/sqrt(fan_in), 1/sqrt(fan_in)); fan_in = 8*3*5.
  const double bound = 1.0 / std::sqrt(120.0);
  expect_uniform(conv.param("weight"), bound, "conv weight");
  Stats b = stats_of(conv.param("bias"));
  EXPECT_GE(b.min, -bound);
  EXPECT_LE(b.max, bound);
  EXPECT_EQ(conv.options().kernel_size, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(conv.options().stride, (std::vector<int64_t>{2, 2}));
  EXPECT_TRUE(Conv2d(3, 8, 3, 1, 1, 1, false).named_parameters().size() == 1);
  EXPECT_THROW(Conv2d(3, 8, 3, 1, 1, 2), Error);  // 3 channels in 2 groups
}

TEST(Linear, ParametersAndDefaultInit) {
  manual_seed(5);
  Linear l(400, 300);
  EXPECT_EQ(l.param("weight").shape(), (std::vector<int64_t>{300, 400}));
  EXPECT_EQ(l.param("bias").shape(), (std::vector<int64_t>{300}));
  expect_uniform(l.param("weight"), 1.0 / 20.0, "linear weight");
  Stats b = stats_of(l.param("bias"));
  EXPECT_GE(b.min, -0.05);
  EXPECT_LE(b.max, 0.05);
  EXPECT_GT(b.max - b.min, 0.05);  // not constant
  EXPECT_EQ(Linear(3, 2, false).named_parameters().size(), 1u);
}

TEST(BatchNorm2d, ParametersBuffersAndInit) {
  BatchNorm2d bn(6);
  auto sd = bn.state_dict();
  ASSERT_EQ(sd.size(), 5u);
  EXPECT_EQ(sd.at("weight").to_vector<float>(), std::vector<float>(6, 1.f));
  EXPECT_EQ(sd.at("bias").to_vector<float>(), std::vector<float>(6, 0.f));
  EXPECT_EQ(sd.at("running_mean").to_vector<float>(), std::vector<float>(6, 0.f));
  EXPECT_EQ(sd.at("running_var").to_vector<float>(), std::vector<float>(6, 1.f));
  EXPECT_EQ(sd.at("num_batches_tracked").dtype(), DType::i64);
  EXPECT_EQ(sd.at("num_batches_tracked").dim(), 0);
  EXPECT_EQ(sd.at("num_batches_tracked").item(), 0.0);
  std::vector<std::string> params;
  for (auto& [n, t] : bn.named_parameters()) params.push_back(n);
  EXPECT_EQ(params, (std::vector<std::string>{"weight", "bias"}));
}

TEST(LayerNormEmbeddingMha, ParametersAndInit) {
  manual_seed(6);
  LayerNorm ln({4, 5}, 1e-6);
  EXPECT_EQ(ln.param("weight").shape(), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(ln.param("weight").to_vector<float>(), std::vector<float>(20, 1.f));
  EXPECT_EQ(ln.param("bias").to_vector<float>(), std::vector<float>(20, 0.f));
  EXPECT_TRUE(LayerNorm({4}, 1e-5, false).named_parameters().empty());

  Embedding emb(1000, 64);
  Stats e = stats_of(emb.param("weight"));
  EXPECT_NEAR(e.mean, 0.0, 0.02);
  EXPECT_NEAR(e.stddev, 1.0, 0.02);

  MultiheadAttention mha(64, 8);
  std::vector<std::string> names;
  for (auto& [n, t] : mha.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight",
                                             "out_proj.bias"}));
  EXPECT_EQ(mha.param("in_proj_weight").shape(), (std::vector<int64_t>{192, 64}));
  expect_uniform(mha.param("in_proj_weight"), std::sqrt(6.0 / (192 + 64)), "in_proj xavier");
  EXPECT_EQ(mha.param("in_proj_bias").to_vector<float>(), std::vector<float>(192, 0.f));
  auto out = mha.child("out_proj");
  EXPECT_EQ(out->param("bias").to_vector<float>(), std::vector<float>(64, 0.f));
  Stats o = stats_of(out->param("weight"));
  EXPECT_LE(o.max, 1.0 / 8.0);  // Linear default: 1/sqrt(64)
  EXPECT_GT(o.max, 0.1);
  EXPECT_THROW(MultiheadAttention(10, 3), Error);
}

// ---------------------------------------------------------------- forward (needs the ops)

TEST(Linear, ForwardMatchesNaive) {
  manual_seed(7);
  Linear l(5, 3);
  Tensor x = randn({2, 4, 5});
  auto xv = x.to_vector<float>(), w = l.param("weight").to_vector<float>(),
       b = l.param("bias").to_vector<float>();
  std::vector<float> want(2 * 4 * 3);
  for (int r = 0; r < 8; ++r)
    for (int o = 0; o < 3; ++o) {
      double acc = b[o];
      for (int i = 0; i < 5; ++i) acc += double(xv[r * 5 + i]) * w[o * 5 + i];
      want[r * 3 + o] = float(acc);
    }
  Tensor y = l.forward(x);
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 4, 3}));
  expect_close(y.to_vector<float>(), want, 1e-5, "linear");
}

TEST(Conv2d, ForwardMatchesNaive) {
  manual_seed(8);
  Conv2d conv(Conv2dOptions{4, 6, {3}, {2}, {1}, {1}, 2, true});
  Tensor x = randn({2, 4, 7, 6});
  Tensor y = conv.forward(x);
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{2, 6, 4, 3}));
  auto xv = x.to_vector<float>(), w = conv.param("weight").to_vector<float>(),
       b = conv.param("bias").to_vector<float>();
  std::vector<float> want;
  for (int n = 0; n < 2; ++n)
    for (int o = 0; o < 6; ++o)
      for (int oh = 0; oh < 4; ++oh)
        for (int ow = 0; ow < 3; ++ow) {
          double acc = b[o];
          int g = o / 3;
          for (int ci = 0; ci < 2; ++ci)
            for (int kh = 0; kh < 3; ++kh)
              for (int kw = 0; kw < 3; ++kw) {
                int ih = oh * 2 - 1 + kh, iw = ow * 2 - 1 + kw;
                if (ih < 0 || ih >= 7 || iw < 0 || iw >= 6) continue;
                acc += double(xv[((n * 4 + g * 2 + ci) * 7 + ih) * 6 + iw]) *
                       w[((o * 2 + ci) * 3 + kh) * 3 + kw];
              }
          want.push_back(float(acc));
        }
  expect_close(y.to_vector<float>(), want, 1e-4, "conv2d");
}

TEST(BatchNorm2d, TrainingUpdatesRunningStatsAndCounter) {
  manual_seed(9);
  BatchNorm2d bn(3, 1e-5, 0.2);
  init::uniform_(bn.param("weight"), 0.5, 1.5);
  init::uniform_(bn.param("bias"), -0.5, 0.5);
  Tensor x = add(mul(randn({4, 3, 5, 5}), 2.0), 1.0);
  auto xv = x.to_vector<float>(), w = bn.param("weight").to_vector<float>(),
       b = bn.param("bias").to_vector<float>();
  bn.train();
  Tensor y = bn.forward(x);
  EXPECT_EQ(bn.buffer("num_batches_tracked").item(), 1.0);
  auto yv = y.to_vector<float>();
  auto rm = bn.buffer("running_mean").to_vector<float>();
  auto rv = bn.buffer("running_var").to_vector<float>();
  for (int c = 0; c < 3; ++c) {
    double sum = 0, sq = 0;
    const int n = 4 * 25;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 25; ++j) sum += xv[(i * 3 + c) * 25 + j];
    double mean = sum / n;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 25; ++j) sq += std::pow(xv[(i * 3 + c) * 25 + j] - mean, 2);
    double var = sq / n;
    EXPECT_NEAR(rm[c], 0.2 * mean, 1e-5);
    EXPECT_NEAR(rv[c], 0.8 + 0.2 * var * n / (n - 1), 1e-4);
    for (int i = 0; i < 4; ++i) {
      int k = (i * 3 + c) * 25 + 7;
      EXPECT_NEAR(yv[k], (xv[k] - mean) / std::sqrt(var + 1e-5) * w[c] + b[c], 1e-4);
    }
  }
  // Eval uses the running statistics and leaves them and the counter alone.
  bn.eval();
  Tensor ye = bn.forward(x);
  EXPECT_EQ(bn.buffer("num_batches_tracked").item(), 1.0);
  EXPECT_EQ(bn.buffer("running_mean").to_vector<float>(), rm);
  auto yev = ye.to_vector<float>();
  for (int k : {0, 30, 99, 250}) {
    int c = (k / 25) % 3;
    EXPECT_NEAR(yev[k], (xv[k] - rm[c]) / std::sqrt(rv[c] + 1e-5) * w[c] + b[c], 1e-4);
  }
  EXPECT_THROW(bn.forward(randn({2, 3})), Error);
}

TEST(LayerNorm, ForwardMatchesNaive) {
  manual_seed(10);
  LayerNorm ln({6}, 1e-6);
  init::normal_(ln.param("weight"));
  init::normal_(ln.param("bias"));
  Tensor x = randn({3, 6});
  auto xv = x.to_vector<float>(), w = ln.param("weight").to_vector<float>(),
       b = ln.param("bias").to_vector<float>();
  std::vector<float> want;
  for (int r = 0; r < 3; ++r) {
    double m = 0, v = 0;
    for (int i = 0; i < 6; ++i) m += xv[r * 6 + i] / 6.0;
    for (int i = 0; i < 6; ++i) v += std::pow(xv[r * 6 + i] - m, 2) / 6.0;
    for (int i = 0; i < 6; ++i)
      want.push_back(float((xv[r * 6 + i] - m) / std::sqrt(v + 1e-6) * w[i] + b[i]));
  }
  expect_close(ln.forward(x).to_vector<float>(), want, 1e-5, "layer_norm");
}

TEST(Embedding, ForwardPicksRows) {
  manual_seed(11);
  Embedding emb(10, 4);
  Tensor idx = from_vector<int64_t>({3, 0, 9, 3}, {2, 2});
  Tensor y = emb.forward(idx);
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{2, 2, 4}));
  auto w = emb.param("weight").to_vector<float>(), yv = y.to_vector<float>();
  const int rows[4] = {3, 0, 9, 3};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(yv[i * 4 + j], w[rows[i] * 4 + j]);
}

TEST(DropoutAndActivations, EvalDropoutIsIdentityAndPoolsHaveShapes) {
  manual_seed(12);
  Tensor x = randn({2, 3, 8, 8});
  Dropout d(0.5);
  d.eval();
  EXPECT_TRUE(d.forward(x).is_same(x));
  d.train();
  auto dv = d.forward(x).to_vector<float>(), xv = x.to_vector<float>();
  int zeros = 0;
  for (size_t i = 0; i < dv.size(); ++i) {
    if (dv[i] == 0)
      ++zeros;
    else
      EXPECT_NEAR(dv[i], 2 * xv[i], 1e-6);
  }
  EXPECT_GT(zeros, 100);
  EXPECT_LT(zeros, 284);
  EXPECT_EQ(MaxPool2d(3, 2, 1).forward(x).shape(), (std::vector<int64_t>{2, 3, 4, 4}));
  EXPECT_EQ(MaxPool2d(3, 2, 0, true).forward(x).shape(), (std::vector<int64_t>{2, 3, 4, 4}));
  EXPECT_EQ(AvgPool2d(2).forward(x).shape(), (std::vector<int64_t>{2, 3, 4, 4}));
  EXPECT_EQ(AdaptiveAvgPool2d({1}).forward(x).shape(), (std::vector<int64_t>{2, 3, 1, 1}));
  EXPECT_EQ(Flatten().forward(x).shape(), (std::vector<int64_t>{2, 192}));
  auto r6 = ReLU6().forward(mul(x, 10.0)).to_vector<float>();
  EXPECT_EQ(*std::max_element(r6.begin(), r6.end()), 6.0f);
  EXPECT_EQ(*std::min_element(r6.begin(), r6.end()), 0.0f);
}

// Naive multi-head attention over [B, L, E] inputs (batch first), for one additive mask
// value per (b, h, l, s).
static std::vector<float> naive_mha(MultiheadAttention& m, const Tensor& q_in, const Tensor& k_in,
                                    const Tensor& v_in, int64_t heads,
                                    const std::function<double(int, int, int, int)>& mask) {
  auto w = m.param("in_proj_weight").to_vector<float>();
  auto bi = m.param("in_proj_bias").to_vector<float>();
  auto ow = m.child("out_proj")->param("weight").to_vector<float>();
  auto ob = m.child("out_proj")->param("bias").to_vector<float>();
  const int B = int(q_in.shape()[0]), L = int(q_in.shape()[1]), S = int(k_in.shape()[1]),
            E = int(q_in.shape()[2]), D = int(E / heads);
  auto proj = [&](const Tensor& x, int part, int len) {
    auto xv = x.to_vector<float>();
    std::vector<double> r(size_t(B) * len * E);
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < len; ++t)
        for (int o = 0; o < E; ++o) {
          double acc = bi[part * E + o];
          for (int i = 0; i < E; ++i)
            acc += double(xv[(b * len + t) * E + i]) * w[(part * E + o) * E + i];
          r[(b * len + t) * E + o] = acc;
        }
    return r;
  };
  auto q = proj(q_in, 0, L), k = proj(k_in, 1, S), v = proj(v_in, 2, S);
  std::vector<double> ctx(size_t(B) * L * E);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < heads; ++h)
      for (int l = 0; l < L; ++l) {
        std::vector<double> sc(S);
        double mx = -1e300;
        for (int s = 0; s < S; ++s) {
          double d = 0;
          for (int j = 0; j < D; ++j)
            d += q[(b * L + l) * E + h * D + j] * k[(b * S + s) * E + h * D + j];
          sc[s] = d / std::sqrt(double(D)) + mask(b, h, l, s);
          mx = std::max(mx, sc[s]);
        }
        double z = 0;
        for (double& s : sc) z += (s = std::exp(s - mx));
        for (int j = 0; j < D; ++j) {
          double acc = 0;
          for (int s = 0; s < S; ++s) acc += sc[s] / z * v[(b * S + s) * E + h * D + j];
          ctx[(b * L + l) * E + h * D + j] = acc;
        }
      }
  std::vector<float> out;
  for (int r = 0; r < B * L; ++r)
    for (int o = 0; o < E; ++o) {
      double acc = ob[o];
      for (int i = 0; i < E; ++i) acc += ctx[r * E + i] * ow[o * E + i];
      out.push_back(float(acc));
    }
  return out;
}

TEST(MultiheadAttention, BatchFirstForwardWithMasksMatchesNaive) {
  manual_seed(13);
  const int64_t B = 2, L = 3, S = 5, E = 8, H = 2;
  MultiheadAttention mha(E, H, true, true);
  init::normal_(mha.param("in_proj_bias"), 0, 0.1);
  init::normal_(mha.child("out_proj")->param("bias"), 0, 0.1);
  Tensor q = randn({B, L, E}), k = randn({B, S, E}), v = randn({B, S, E});
  // Unmasked, self-attention form.
  auto none = [](int, int, int, int) { return 0.0; };
  expect_close(mha.forward(q, q, q).to_vector<float>(), naive_mha(mha, q, q, q, H, none), 1e-4,
               "mha self");
  // key_padding_mask (true = ignore) and a float attn_mask [L, S].
  Tensor kpm = from_vector<bool>(
      {false, false, false, true, true, false, true, false, false, false}, {B, S});
  Tensor am = randn({L, S});
  auto kpv = kpm.to_vector<bool>();
  auto amv = am.to_vector<float>();
  auto masked = [&](int b, int, int l, int s) {
    return (kpv[b * S + s] ? -std::numeric_limits<double>::infinity() : 0.0) + amv[l * S + s];
  };
  Tensor y = mha.forward(q, k, v, kpm, am);
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{B, L, E}));
  expect_close(y.to_vector<float>(), naive_mha(mha, q, k, v, H, masked), 1e-4, "mha masked");
  // A bool attn_mask (true = masked out) per batch*head.
  Tensor bm = from_vector<bool>(std::vector<bool>(B * H * L * S, false), {B * H, L, S});
  bm.data<bool>()[1] = true;  // b 0, h 0, l 0, s 1
  auto bmask = [&](int b, int h, int l, int s) {
    return (b == 0 && h == 0 && l == 0 && s == 1) ? -std::numeric_limits<double>::infinity() : 0.0;
  };
  expect_close(mha.forward(q, k, v, {}, bm).to_vector<float>(), naive_mha(mha, q, k, v, H, bmask),
               1e-4, "mha bool mask");
  EXPECT_THROW(mha.forward(q, k, v, kpm.slice(1, 0, 4)), Error);
}

TEST(MultiheadAttention, SequenceFirstLayout) {
  manual_seed(14);
  MultiheadAttention seq_first(8, 4), batch_first(8, 4, true, true);
  batch_first.load_state_dict(seq_first.state_dict());
  Tensor x = randn({2, 3, 8});  // [B, L, E]
  Tensor y_bf = batch_first.forward(x);
  Tensor y_sf = seq_first.forward(x.transpose(0, 1).contiguous());  // [L, B, E]
  EXPECT_EQ(y_sf.shape(), (std::vector<int64_t>{3, 2, 8}));
  expect_close(y_sf.transpose(0, 1).contiguous().to_vector<float>(), y_bf.to_vector<float>(), 1e-5,
               "seq first");
}
