// Fused attention: the sdpa_fused op against the ops it replaces (scores over several key blocks,
// masks that broadcast, -inf entries, strided q / k / v), and the fuse_attention pass on the
// graphs that scaled_dot_product_attention and bert / vit produce.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <mutex>

#include "lathe/backend/backend.h"
#include "lathe/backend/cpu/cpu_backend.h"
#include "lathe/backend/cpu/fuse_attention.h"
#include "lathe/core/random.h"
#include "lathe/kernels/vec_exp2.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"
#include "lathe/trace/compile.h"
#include "tests/models/small_models.h"

using namespace lathe;

namespace {

Tensor rnd(const std::vector<int64_t>& shape, uint64_t seed) {
  Generator g(seed);
  return randn(to_shape(shape), DType::f32, &g);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

struct SdpaCase {
  int64_t B, H, L, S, E, Ev;
  int mask;  // 0 none, 1 [B,1,1,S] with -inf entries, 2 full [B,H,L,S]
  bool strided;
};

class SdpaFused : public ::testing::TestWithParam<SdpaCase> {};

TEST_P(SdpaFused, EqualsTheOpsItReplaces) {
  const SdpaCase c = GetParam();
  Tensor q, k, v;
  if (c.strided) {  // [B,L,H,E] transposed, as bert's heads are
    q = rnd({c.B, c.L, c.H, c.E}, 1).transpose(1, 2);
    k = rnd({c.B, c.S, c.H, c.E}, 2).transpose(1, 2);
    v = rnd({c.B, c.S, c.H, c.Ev}, 3).transpose(1, 2);
  } else {
    q = rnd({c.B, c.H, c.L, c.E}, 1);
    k = rnd({c.B, c.H, c.S, c.E}, 2);
    v = rnd({c.B, c.H, c.S, c.Ev}, 3);
  }
  Tensor mask;
  if (c.mask == 1) {
    Generator g(4);
    Tensor keep = lt(rand({c.B, 1, 1, c.S}, DType::f32, &g), 0.8);
    mask = where(keep, zeros({}), full({}, -std::numeric_limits<double>::infinity()));
    // Key 0 is always kept so no row is all -inf.
    mask = add(mask, zeros({c.B, 1, 1, c.S}));
    std::vector<float> mv = mask.to_vector<float>();
    for (int64_t b = 0; b < c.B; ++b) mv[b * c.S] = 0;
    mask = from_vector(mv, to_shape({c.B, 1, 1, c.S}));
  } else if (c.mask == 2) {
    mask = rnd({c.B, c.H, c.L, c.S}, 5);
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.E));
  Tensor scores = mul(matmul(q, k.transpose(-2, -1)), scale);
  if (mask.defined()) scores = add(scores, mask);
  Tensor want = matmul(softmax(scores, -1), v);
  std::vector<Tensor> in{q, k.transpose(-2, -1), v, full({}, scale), mask};
  Tensor got = dispatch1(LATHE_OP("sdpa_fused"), in, Attrs{{"scale", 1.0}, {"divide", false}});
  EXPECT_TRUE(got.is_contiguous());
  EXPECT_LT(max_abs_diff(got, want), 2e-5);
  // The same with the scale as a divisor and as the attribute alone.
  std::vector<Tensor> in2{q, k.transpose(-2, -1), v, full({}, std::sqrt(double(c.E))), mask};
  Tensor got2 = dispatch1(LATHE_OP("sdpa_fused"), in2, Attrs{{"scale", 1.0}, {"divide", true}});
  EXPECT_LT(max_abs_diff(got2, want), 2e-5);
  std::vector<Tensor> in3{q, k.transpose(-2, -1), v, Tensor(), mask};
  Tensor got3 = dispatch1(LATHE_OP("sdpa_fused"), in3, Attrs{{"scale", scale}, {"divide", false}});
  EXPECT_LT(max_abs_diff(got3, want), 2e-5);
}

INSTANTIATE_TEST_SUITE_P(Cases, SdpaFused,
                         ::testing::Values(SdpaCase{1, 2, 5, 7, 8, 16, 0, false},
                                           SdpaCase{2, 3, 12, 12, 16, 16, 1, true},
                                           SdpaCase{1, 2, 197, 197, 64, 64, 0, true},
                                           SdpaCase{2, 2, 33, 150, 24, 40, 2, false},
                                           SdpaCase{1, 1, 9, 300, 64, 64, 1, false},
                                           // several 32-row query blocks, the last partial; one
                                           // head on several threads (query chunks)
                                           SdpaCase{1, 1, 100, 130, 40, 24, 1, true},
                                           SdpaCase{1, 12, 128, 128, 64, 64, 1, true},
                                           SdpaCase{1, 2, 70, 65, 20, 72, 2, true}));

TEST(SdpaFused, VectorExp2MatchesTheScalarOne) {
#ifdef LATHE_HAVE_VEC_EXP2
  std::vector<float> xs;
  for (float x = -130.0f; x <= 127.0f; x += 0.0371f) xs.push_back(x);
  for (float x : {0.0f, -0.5f, 0.5f, -126.0f, -125.99f, 126.9f, -1e-8f}) xs.push_back(x);
  for (size_t i = 0; i < xs.size(); i += 8) {
    float in[8], got[8];
    for (size_t l = 0; l < 8; ++l) in[l] = xs[std::min(i + l, xs.size() - 1)];
    _mm256_storeu_ps(got, kernels::exp2_avx2(_mm256_loadu_ps(in)));
    for (int l = 0; l < 8; ++l) {
      const double want = in[l] < -126.0f ? 0.0 : std::exp2(static_cast<double>(in[l]));
      EXPECT_LE(std::abs(got[l] - want), 3e-7 * want) << "2^" << in[l];
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  float special[8] = {-inf, std::nanf(""), -1000.0f, -127.0f, 0, 1, 2, 3}, got[8];
  _mm256_storeu_ps(got, kernels::exp2_avx2(_mm256_loadu_ps(special)));
  EXPECT_EQ(got[0], 0.0f);
  EXPECT_TRUE(std::isnan(got[1]));
  EXPECT_EQ(got[2], 0.0f);
  EXPECT_EQ(got[3], 0.0f);
  EXPECT_EQ(got[5], 2.0f);
  EXPECT_EQ(got[7], 8.0f);
  // The top of the range: 2^127.x is finite, 2^128 and beyond (and +inf) overflow to +inf.
  float high[8] = {127.0f, 127.4f, 127.6f, 127.99f, 128.0f, 200.0f, inf, 1e30f};
  _mm256_storeu_ps(got, kernels::exp2_avx2(_mm256_loadu_ps(high)));
  for (int l = 0; l < 4; ++l) {
    const double want = std::exp2(static_cast<double>(high[l]));
    EXPECT_LE(std::abs(got[l] - want), 3e-7 * want) << "2^" << high[l];
  }
  for (int l = 4; l < 8; ++l) EXPECT_EQ(got[l], inf) << "2^" << high[l];
#else
  FAIL() << "tests/backend/test_attention.cpp must be built with LATHE_ARCH_FLAGS (AVX2/FMA), as "
            "the kernels are";
#endif
}

// Large scores (a sharp softmax over several key blocks, where the running max moves), a row whose
// keys are all masked out (NaN, as softmax gives) and a NaN in q (propagates to its row only).
TEST(SdpaFused, SharpSoftmaxAllMaskedRowAndNaN) {
  const int64_t L = 40, S = 200, E = 32;
  Tensor q = mul(rnd({1, 2, L, E}, 1), 6.0), k = rnd({1, 2, S, E}, 2), v = rnd({1, 2, S, E}, 3);
  Tensor mask = rnd({1, 2, L, S}, 4);
  std::vector<float> mv = mask.to_vector<float>();
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < S; ++j) mv[5 * S + j] = -inf;  // head 0, row 5
  mask = from_vector(mv, to_shape({1, 2, L, S}));
  std::vector<float> qv = q.to_vector<float>();
  qv[(L + 7) * E + 3] = std::nanf("");  // head 1, row 7
  q = from_vector(qv, to_shape({1, 2, L, E}));
  auto reference = [&](DType t) {
    Tensor qt = q.to(t), kt = k.to(t), vt = v.to(t), mt = mask.to(t);
    return matmul(softmax(add(matmul(qt, kt.transpose(-2, -1)), mt), -1), vt);
  };
  std::vector<Tensor> in{q, k.transpose(-2, -1), v, Tensor(), mask};
  Tensor got = dispatch1(LATHE_OP("sdpa_fused"), in, Attrs{{"scale", 1.0}, {"divide", false}});
  // Scores of size ~40 amplify f32 rounding in the exponent: judge both against f64.
  auto g = got.to_vector<double>(), e = reference(DType::f32).to_vector<double>(),
       w = reference(DType::f64).to_vector<double>();
  ASSERT_EQ(g.size(), w.size());
  double worst = 0, eager_worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const int64_t row = static_cast<int64_t>(i) / E;
    if (row == 5 || row == L + 7) {
      EXPECT_TRUE(std::isnan(g[i])) << "row " << row;
      EXPECT_TRUE(std::isnan(w[i])) << "row " << row;
      continue;
    }
    worst = std::max(worst, std::abs(g[i] - w[i]));
    eager_worst = std::max(eager_worst, std::abs(e[i] - w[i]));
  }
  EXPECT_LT(worst, std::max(2e-5, 2 * eager_worst)) << "eager f32 is off by " << eager_worst;
}

TEST(SdpaFused, ShapeRuleErrors) {
  const Attrs a{{"scale", 1.0}, {"divide", false}};
  auto run = [&](std::vector<Tensor> in) { return dispatch1(LATHE_OP("sdpa_fused"), in, a); };
  Tensor q = rnd({1, 2, 4, 8}, 1), kt = rnd({1, 2, 8, 5}, 2), v = rnd({1, 2, 5, 8}, 3);
  EXPECT_THROW(run({q, rnd({1, 2, 7, 5}, 2), v, Tensor(), Tensor()}), Error);
  EXPECT_THROW(run({q, kt, rnd({1, 2, 6, 8}, 3), Tensor(), Tensor()}), Error);
  EXPECT_THROW(run({q.to(DType::f64), kt, v, Tensor(), Tensor()}), Error);
  EXPECT_THROW(run({q, kt, v, Tensor(), rnd({1, 2, 4, 6}, 4)}), Error);
  EXPECT_THROW(run({q, kt, v, rnd({2}, 5), Tensor()}), Error);
  try {
    run({q, rnd({1, 2, 7, 5}, 2), v, Tensor(), Tensor()});
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("[sdpa_fused] q f32[1,2,4,8] and kt f32[1,2,7,5]", 0), 0u)
        << e.what();
  }
}

// ---- the pass, on graphs that tracing produces ----

// A backend that records the op names of the optimized graph it compiles, then runs it.
std::mutex g_mu;
std::vector<std::string> g_ops;

class RecordingBackend final : public backend::Backend {
 public:
  std::string name() const override { return "record_cpu_ops"; }
  std::unique_ptr<backend::Executable> compile(const ir::Graph& graph) override {
    auto g = backend::cpu::run_passes(graph);
    {
      std::lock_guard<std::mutex> lock(g_mu);
      g_ops.clear();
      for (const ir::Node* n : g->nodes()) g_ops.push_back(n->op().name);
    }
    return backend::create_backend("cpu")->compile(graph);
  }
};

void register_recorder() {
  static bool done = [] {
    backend::register_backend("record_cpu_ops",
                              [] { return std::make_unique<RecordingBackend>(); });
    return true;
  }();
  (void)done;
}

int count(const std::string& op) {
  return static_cast<int>(std::count(g_ops.begin(), g_ops.end(), op));
}

TEST(FuseAttentionPass, FusesScaledDotProductAttentionWithAndWithoutMask) {
  register_recorder();
  CompileOptions o;
  o.backend = "record_cpu_ops";
  for (bool masked : {false, true}) {
    auto f = compile(
        [masked](const std::vector<Tensor>& a) {
          return scaled_dot_product_attention(a[0], a[1], a[2], masked ? a[3] : Tensor());
        },
        o);
    Tensor q = rnd({2, 3, 10, 16}, 1), k = rnd({2, 3, 14, 16}, 2), v = rnd({2, 3, 14, 8}, 3);
    Tensor mask = rnd({2, 1, 1, 14}, 4);
    auto got = f({q, k, v, mask});
    Tensor want = scaled_dot_product_attention(q, k, v, masked ? mask : Tensor());
    EXPECT_LT(max_abs_diff(got[0], want), 2e-5);
    EXPECT_EQ(count("sdpa_fused"), 1) << "masked " << masked;
    EXPECT_EQ(count("softmax"), 0);
  }
}

// bert's and vit's form: the heads moved back beside the embedding and merged. The fused node
// writes [B, L, H, E] itself (the permute goes) and the merge reshape reads it as a view.
TEST(FuseAttentionPass, AbsorbsThePermuteThatMergesTheHeads) {
  register_recorder();
  CompileOptions o;
  o.backend = "record_cpu_ops";
  auto merged = [](const std::vector<Tensor>& a) {
    Tensor y = scaled_dot_product_attention(a[0], a[1], a[2], a[3]);  // [B, H, L, E]
    return y.permute({0, 2, 1, 3}).reshape({a[0].sizes()[0], a[0].sizes()[2], -1});
  };
  auto f = compile(merged, o);
  Tensor q = rnd({2, 3, 10, 16}, 1), k = rnd({2, 3, 14, 16}, 2), v = rnd({2, 3, 14, 8}, 3);
  Tensor mask = rnd({2, 1, 1, 14}, 4);
  for (int call = 0; call < 3; ++call) {  // records, then runs the plan
    Tensor got = f({q, k, v, mask})[0];
    Tensor want = merged({q, k, v, mask});
    ASSERT_EQ(got.shape(), (std::vector<int64_t>{2, 10, 24}));
    EXPECT_LT(max_abs_diff(got, want), 2e-5) << "call " << call;
  }
  EXPECT_EQ(count("sdpa_fused"), 1);
  EXPECT_EQ(count("permute"), 1);  // k's transpose (read by the fused node); the heads' one went
  EXPECT_EQ(count("reshape"), 1);
}

TEST(FuseAttentionPass, LeavesAttentionWhoseScoresAreUsedElsewhere) {
  register_recorder();
  CompileOptions o;
  o.backend = "record_cpu_ops";
  auto f = compile(
      [](const std::vector<Tensor>& a) {
        Tensor p = softmax(matmul(a[0], a[1].transpose(-2, -1)), -1);
        return std::vector<Tensor>{matmul(p, a[2]), p};
      },
      o);
  Tensor q = rnd({1, 2, 6, 8}, 1), k = rnd({1, 2, 6, 8}, 2), v = rnd({1, 2, 6, 8}, 3);
  auto got = f({q, k, v});
  EXPECT_EQ(count("sdpa_fused"), 0);
  Tensor p = softmax(matmul(q, k.transpose(-2, -1)), -1);
  EXPECT_LT(max_abs_diff(got[0], matmul(p, v)), 1e-6);
}

class AttentionZoo : public ::testing::TestWithParam<std::string> {};

TEST_P(AttentionZoo, EveryLayerIsFusedAndTheModelEqualsEager) {
  register_recorder();
  const std::string name = GetParam();
  auto spec = test_models::small_model(name, 3, 256);
  CompileOptions o;
  o.backend = "record_cpu_ops";
  auto f = compile(spec->module, o);
  models::InputOptions io;
  io.image_size = 0;
  io.seq_len = 12;
  if (name == "bert") io.bert = test_models::small_bert(256);
  if (name == "vit") io.vit = test_models::small_vit();
  auto in = models::default_inputs(name, 2, 1, io);
  auto want = spec->forward(in);
  auto got = f(in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_LT(max_abs_diff(got[i], want[i]), 1e-4);
  EXPECT_GT(count("sdpa_fused"), 0);
  EXPECT_EQ(count("softmax"), 0) << "an attention layer was left unfused";
}

INSTANTIATE_TEST_SUITE_P(Zoo, AttentionZoo, ::testing::Values("bert", "vit"));

}  // namespace
