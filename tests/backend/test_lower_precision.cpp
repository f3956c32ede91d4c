// Pass lower_precision and the bf16-precision contractions it selects: on a hand-built graph
// (which nodes take precision = "bf16" and which stay f32), the kernels alone (a bf16-precision
// conv2d and linear equal the f64 products of the bf16-rounded operands to f32-accumulation
// accuracy, on odd sizes, strides and layouts, NaN and inf kept), and lathe::compile with
// CompileOptions::precision = bf16 on a small CNN and an MLP (close to eager f32, weights never
// written, training entries untouched). Where the CPU has no bf16 kernels (dnnl_bf16_native) the
// same tests check that nothing changes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "lathe/backend/cpu/lower_precision.h"
#include "lathe/core/grad_mode.h"
#include "lathe/core/random.h"
#include "lathe/ir/graph.h"
#include "lathe/kernels/dnnl_common.h"
#include "lathe/kernels/dnnl_conv.h"
#include "lathe/kernels/dnnl_matmul.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"
#include "lathe/trace/compile.h"

using namespace lathe;

namespace {

Tensor rnd(const std::vector<int64_t>& shape, uint64_t seed) {
  Generator g(seed);
  return randn(to_shape(shape), DType::f32, &g);
}

// t rounded to bf16 and widened to f64: the operands a bf16-precision kernel multiplies.
Tensor rounded(const Tensor& t) { return t.to(DType::bf16).to(DType::f64); }

bool same(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.to_vector<double>() == b.to_vector<double>();
}

// max |a - b| / max |b|.
double rel_err(const Tensor& a, const Tensor& b) {
  auto x = a.to(DType::f64).to_vector<double>(), y = b.to(DType::f64).to_vector<double>();
  EXPECT_EQ(x.size(), y.size());
  double m = 0, scale = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    m = std::max(m, std::abs(x[i] - y[i]));
    scale = std::max(scale, std::abs(y[i]));
  }
  return m / std::max(scale, 1e-30);
}

struct Built {
  ir::Graph g;
  ir::Value* input(const Tensor& t) {
    return g.add_input(ir::ValueType::of(t),
                       ir::InputSource{ir::InputSource::Kind::argument, static_cast<int>(n++), ""});
  }
  ir::Value* node(const char* op, std::vector<ir::Value*> in, Attrs a) {
    const OpDef& def = OpRegistry::global().get(op);
    std::vector<Tensor> fakes;
    for (ir::Value* v : in) fakes.push_back(v ? ir::fake_tensor(v->type()) : Tensor());
    std::vector<TensorMeta> m = def.shape(fakes, a);
    ir::ValueType t;
    t.dtype = m[0].dtype;
    t.sizes = m[0].sizes;
    return g.add_node(def, std::move(in), std::move(a), {t})->output();
  }
  size_t n = 0;
};

Attrs conv_attrs(int64_t groups) {
  return Attrs{{"stride", Shape{1, 1}},
               {"padding", Shape{1, 1}},
               {"dilation", Shape{1, 1}},
               {"groups", int64_t{groups}}};
}

std::string precision_of(const ir::Node& n) {
  return n.attrs().has("precision") ? n.attrs().get_string("precision") : "-";
}

TEST(LowerPrecisionPass, MarksConvolutionsAndLinearsNotDepthwiseOrF64) {
  Built b;
  ir::Value* x = b.input(rnd({1, 8, 6, 6}, 1));
  ir::Value* w = b.input(rnd({8, 8, 3, 3}, 2));
  ir::Value* wd = b.input(rnd({8, 1, 3, 3}, 3));
  ir::Value* y = b.node("conv2d", {x, w, nullptr}, conv_attrs(1));
  ir::Value* z = b.node("conv2d", {y, wd, nullptr}, conv_attrs(8));  // depthwise
  ir::Value* f = b.node("reshape", {z}, Attrs{{"size", Shape{1, 288}}});
  ir::Value* wl = b.input(rnd({5, 288}, 4));
  ir::Value* l = b.node("linear", {f, wl, nullptr}, Attrs{});
  ir::Value* x64 = b.input(rnd({3, 4}, 5).to(DType::f64));
  ir::Value* w64 = b.input(rnd({2, 4}, 6).to(DType::f64));
  ir::Value* l64 = b.node("linear", {x64, w64, nullptr}, Attrs{});
  b.g.set_outputs({l, l64});

  backend::cpu::LowerPrecisionStats s;
  auto same = backend::cpu::lower_precision(b.g, DType::f32, &s);
  for (const ir::Node* n : same->nodes()) EXPECT_EQ(precision_of(*n), "-") << n->op().name;
  EXPECT_EQ(s.convs + s.linears, 0);

  auto g = backend::cpu::lower_precision(b.g, DType::bf16, &s);
  std::vector<std::string> marks;
  for (const ir::Node* n : g->nodes())
    if (n->op().name == "conv2d" || n->op().name == "linear") marks.push_back(precision_of(*n));
  if (detail::dnnl_bf16_native()) {
    EXPECT_EQ(marks, (std::vector<std::string>{"bf16", "-", "bf16", "-"}));
    EXPECT_EQ(s.convs, 1);
    EXPECT_EQ(s.linears, 1);
    EXPECT_EQ(s.depthwise_kept, 1);
    EXPECT_FALSE(s.unsupported);
  } else {
    EXPECT_EQ(marks, (std::vector<std::string>{"-", "-", "-", "-"}));
    EXPECT_TRUE(s.unsupported);
  }
  EXPECT_THROW(backend::cpu::lower_precision(b.g, DType::f64), Error);
}

TEST(LowerPrecisionPass, RejectsAnUnknownPrecisionAttribute) {
  EXPECT_FALSE(detail::precision_bf16(Attrs{}, "linear"));
  EXPECT_FALSE(detail::precision_bf16(Attrs{{"precision", std::string("f32")}}, "linear"));
  EXPECT_TRUE(detail::precision_bf16(Attrs{{"precision", std::string("bf16")}}, "linear"));
  try {
    detail::precision_bf16(Attrs{{"precision", std::string("f16")}}, "linear");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[linear] precision must be"), std::string::npos)
        << e.what();
  }
}

// A conv2d at bf16 precision: the f64 convolution of the rounded operands, to f32 accumulation.
TEST(Bf16PrecisionKernels, ConvolutionMultipliesRoundedOperandsAccumulatingInF32) {
  struct Case {
    std::vector<int64_t> x, w;
    int64_t groups, stride, pad;
    bool channels_last, bias;
  };
  const Case cases[] = {{{1, 3, 17, 13}, {16, 3, 3, 3}, 1, 2, 1, false, true},     // a stem
                        {{2, 64, 9, 9}, {32, 64, 1, 1}, 1, 1, 0, true, false},     // 1x1
                        {{1, 24, 7, 11}, {40, 12, 3, 3}, 2, 1, 1, true, true},     // grouped
                        {{1, 256, 5, 5}, {64, 256, 3, 3}, 1, 1, 1, false, true}};  // long sums
  uint64_t seed = 10;
  for (const Case& c : cases) {
    Tensor x = rnd(c.x, ++seed), w = rnd(c.w, ++seed);
    if (c.channels_last) x = x.to_channels_last();
    Tensor bias = c.bias ? rnd({c.w[0]}, ++seed) : Tensor();
    detail::Conv2dParams p;
    p.stride[0] = p.stride[1] = c.stride;
    p.padding[0] = p.padding[1] = c.pad;
    p.groups = c.groups;
    p.bf16 = true;
    const std::vector<int64_t> st{1, 1}, pd{c.pad, c.pad}, dl{1, 1};
    const std::vector<int64_t> stv{c.stride, c.stride};
    Tensor ref = conv2d(rounded(x), rounded(w), bias.defined() ? bias.to(DType::f64) : bias, stv,
                        pd, dl, c.groups);
    Tensor exact = conv2d(x.to(DType::f64), w.to(DType::f64),
                          bias.defined() ? bias.to(DType::f64) : bias, stv, pd, dl, c.groups);
    Tensor out = empty(ref.sizes(), DType::f32).to_channels_last();
    Tensor w_before = w.clone();
    detail::conv2d_forward(x, w, bias, p, out);
    EXPECT_TRUE(same(w, w_before)) << "the weight must not be written";
    if (detail::dnnl_bf16_native()) {
      EXPECT_LT(rel_err(out, ref), 2e-6) << "x " << x.shape_string() << " w " << w.shape_string();
      EXPECT_GT(rel_err(out, exact), 1e-4) << "the operands must be rounded to bf16";
      EXPECT_LT(rel_err(out, exact), 3e-2);
    } else {
      EXPECT_LT(rel_err(out, exact), 1e-5) << "no bf16 kernels: f32";
    }
  }
}

TEST(Bf16PrecisionKernels, LinearMultipliesRoundedOperandsAndKeepsNanInf) {
  const int64_t shapes[][3] = {{1, 1000, 37}, {7, 768, 768}, {13, 33, 65}};
  uint64_t seed = 40;
  for (const auto& s : shapes) {
    const int64_t M = s[0], K = s[1], N = s[2];
    // x a strided view (every other row of a wider matrix), w transposed in memory.
    Tensor xw = rnd({M, 2 * K}, ++seed);
    Tensor x = xw.slice(1, 0, K);
    Tensor w = rnd({K, N}, ++seed).t();
    Tensor bias = rnd({N}, ++seed);
    Tensor ref = linear(rounded(x), rounded(w), bias.to(DType::f64));
    Tensor exact = linear(x.to(DType::f64), w.to(DType::f64), bias.to(DType::f64));
    Tensor out = empty({M, N}, DType::f32);
    detail::linear_forward(x, w, bias, out, {}, true);
    if (detail::dnnl_bf16_native()) {
      EXPECT_LT(rel_err(out, ref), 2e-6) << M << "x" << K << "x" << N;
      EXPECT_GT(rel_err(out, exact), 1e-4);
    } else {
      EXPECT_LT(rel_err(out, exact), 1e-5);
    }
  }
  // NaN and inf in the input reach the outputs they feed, as in f32.
  Tensor x = rnd({2, 16}, 50), w = rnd({3, 16}, 51);
  auto xv = x.to_vector<float>();
  xv[0] = std::numeric_limits<float>::quiet_NaN();
  xv[16] = std::numeric_limits<float>::infinity();
  x = from_vector(xv, {2, 16});
  Tensor out = empty({2, 3}, DType::f32);
  detail::linear_forward(x, w, {}, out, {}, true);
  auto o = out.to_vector<float>();
  for (int j = 0; j < 3; ++j) {
    EXPECT_TRUE(std::isnan(o[j]));
    EXPECT_TRUE(std::isinf(o[3 + j]) || std::isnan(o[3 + j]));
  }
}

// A small CNN (conv, batch norm, relu, residual, pooling, linear) and an MLP, compiled at bf16.
TEST(Bf16PrecisionCompile, InferenceIsCloseToEagerAndTrainingStaysF32) {
  Tensor w1 = rnd({16, 3, 3, 3}, 60), w2 = rnd({16, 16, 3, 3}, 61) * 0.2, fc = rnd({10, 16}, 62);
  Tensor mean = rnd({16}, 63) * 0.1, var = add(abs(rnd({16}, 64)), 0.5);
  Tensor gamma = rnd({16}, 65), beta = rnd({16}, 66);
  auto net = [=](const std::vector<Tensor>& a) {
    Tensor h = relu(
        batch_norm(conv2d(a[0], w1, {}, {1, 1}, {1, 1}), mean, var, gamma, beta, false, 0.1, 1e-5));
    Tensor r = relu(add(conv2d(h, w2, {}, {1, 1}, {1, 1}), h));
    Tensor p = adaptive_avg_pool2d(r, {1, 1}).reshape({-1, 16});
    return std::vector<Tensor>{linear(p, fc)};
  };
  Tensor x = rnd({2, 3, 20, 20}, 67);
  NoGradGuard ng;
  Tensor eager = net({x})[0];
  CompileOptions f32o, bf16o;
  bf16o.precision = DType::bf16;
  auto f32 = compile(net, f32o), bf16 = compile(net, bf16o);
  Tensor x_before = x.clone(), mean_before = mean.clone(), var_before = var.clone();
  Tensor a = f32({x})[0];
  EXPECT_TRUE(same(x, x_before)) << "the argument must not be written";
  EXPECT_TRUE(same(mean, mean_before) && same(var, var_before)) << "nor the statistics";
  EXPECT_TRUE(same(eager, net({x})[0])) << "eager again";
  Tensor x2 = rnd({2, 3, 20, 20}, 99);
  EXPECT_LT(rel_err(f32({x2})[0], net({x2})[0]), 1e-4) << "a second call";
  Tensor b = bf16({x})[0];
  Tensor w1_before = w1.clone();
  Tensor b2 = bf16({x})[0];
  EXPECT_TRUE(same(b, b2)) << "a second call gives the same result";
  EXPECT_TRUE(same(w1, w1_before));
  EXPECT_LT(rel_err(a, eager), 1e-4);
  if (detail::dnnl_bf16_native()) {
    EXPECT_GT(rel_err(b, eager), 1e-5) << "the bf16 compile computed in f32";
    EXPECT_LT(rel_err(b, eager), 3e-2);
  } else {
    EXPECT_LT(rel_err(b, eager), 1e-4);
  }
  EXPECT_EQ(bf16.stats().compiles, 1);
}

TEST(Bf16PrecisionCompile, TrainingEntriesComputeInF32) {
  Tensor w = rnd({8, 12}, 70).set_requires_grad(true);
  CompileOptions o;
  o.precision = DType::bf16;
  auto f = compile([&](const std::vector<Tensor>& a) { return sum(tanh(linear(a[0], w))); }, o);
  Tensor x = rnd({4, 12}, 71);
  Tensor loss = f({x})[0];
  loss.backward();
  Tensor g = w.grad().clone();
  w.set_grad(Tensor());
  Tensor eager = sum(tanh(linear(x, w)));
  eager.backward();
  EXPECT_LT(rel_err(loss, eager), 1e-6);
  EXPECT_LT(rel_err(g, w.grad()), 1e-5);
}

TEST(Bf16PrecisionCompile, PrecisionFromTheEnvironment) {
  setenv("LATHE_PRECISION", "bf16", 1);
  EXPECT_EQ(compile_options_from_env().precision, DType::bf16);
  setenv("LATHE_PRECISION", "f32", 1);
  EXPECT_EQ(compile_options_from_env().precision, DType::f32);
  setenv("LATHE_PRECISION", "fp8", 1);
  EXPECT_THROW(compile_options_from_env(), Error);
  unsetenv("LATHE_PRECISION");
  EXPECT_EQ(compile_options_from_env().precision, DType::f32);
  CompileOptions o;
  o.precision = DType::bf16;
  EXPECT_NE(o.to_string().find("precision=bf16"), std::string::npos) << o.to_string();
}

}  // namespace
