// vjp rules of the elementwise ops (binary with broadcasting, unary activations, where).
#include <cmath>

#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"
#include "lathe/ops/vjp_util.h"

namespace lathe::detail {
namespace {

using G = std::vector<Tensor>;
using Needs = std::vector<bool>;

double alpha_of(const Attrs& a) { return a.has("alpha") ? a.get_double("alpha") : 1.0; }

// A unary rule reading input 0 (x) and/or output 0 (y): d(x, y, g, attrs) -> grad of x.
template <class F>
void unary(OpRegistry& r, const char* name, VjpReads reads, F d) {
  set_vjp(r, name, reads,
          [d](TensorList in, TensorList out, TensorList g, const Attrs& a, const Needs&) {
            return G{d(in[0], out[0], g[0], a)};
          });
}

Tensor sign(const Tensor& x) { return sub(gt(x, 0.0).to(x.dtype()), lt(x, 0.0).to(x.dtype())); }

constexpr double kSqrt1_2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;

}  // namespace

void register_unary_vjps(OpRegistry& r);

void register_elementwise_vjps(OpRegistry& r) {
  set_vjp(r, "add", {},
          [](TensorList in, TensorList, TensorList g, const Attrs& a, const Needs& n) {
            G out(2);
            if (n[0]) out[0] = sum_to(g[0], in[0].sizes());
            if (n[1]) out[1] = sum_to(mul(g[0], alpha_of(a)), in[1].sizes());
            return out;
          });
  set_vjp(r, "sub", {},
          [](TensorList in, TensorList, TensorList g, const Attrs& a, const Needs& n) {
            G out(2);
            if (n[0]) out[0] = sum_to(g[0], in[0].sizes());
            if (n[1]) out[1] = sum_to(mul(g[0], -alpha_of(a)), in[1].sizes());
            return out;
          });
  set_vjp(r, "mul", {{0, 1}},
          [](TensorList in, TensorList, TensorList g, const Attrs&, const Needs& n) {
            G out(2);
            if (n[0]) out[0] = sum_to(mul(g[0], in[1]), in[0].sizes());
            if (n[1]) out[1] = sum_to(mul(g[0], in[0]), in[1].sizes());
            return out;
          });
  set_vjp(r, "div", {{0, 1}},
          [](TensorList in, TensorList, TensorList g, const Attrs&, const Needs& n) {
            G out(2);
            if (n[0]) out[0] = sum_to(div(g[0], in[1]), in[0].sizes());
            if (n[1]) out[1] = sum_to(neg(div(mul(g[0], in[0]), mul(in[1], in[1]))), in[1].sizes());
            return out;
          });
  set_vjp(r, "pow", {{0, 1}, true},
          [](TensorList in, TensorList o, TensorList g, const Attrs&, const Needs& n) {
            const Tensor &a = in[0], &b = in[1];
            G out(2);
            if (n[0]) out[0] = sum_to(mul(g[0], mul(b, pow(a, sub(b, 1.0)))), a.sizes());
            if (n[1]) {
              // 0^b has no log: PyTorch's gradient there is 0 for b >= 0.
              Tensor safe = where(eq(a, 0.0), mul(o[0], 0.0), mul(o[0], log(a)));
              out[1] = sum_to(mul(g[0], safe), b.sizes());
            }
            return out;
          });
  // Equal operands share the gradient (as PyTorch's maximum / minimum).
  auto pick = [](bool is_max) {
    return [is_max](TensorList in, TensorList, TensorList g, const Attrs&, const Needs& n) {
      const Tensor &a = in[0], &b = in[1];
      Tensor a_wins = (is_max ? gt(a, b) : lt(a, b)).to(g[0].dtype());
      Tensor tie = mul(eq(a, b).to(g[0].dtype()), 0.5);
      G out(2);
      if (n[0]) out[0] = sum_to(mul(g[0], add(a_wins, tie)), a.sizes());
      Tensor b_wins = (is_max ? gt(b, a) : lt(b, a)).to(g[0].dtype());
      if (n[1]) out[1] = sum_to(mul(g[0], add(b_wins, tie)), b.sizes());
      return out;
    };
  };
  set_vjp(r, "maximum", {{0, 1}}, pick(true));
  set_vjp(r, "minimum", {{0, 1}}, pick(false));
  set_vjp(r, "where", {{0}},
          [](TensorList in, TensorList, TensorList g, const Attrs&, const Needs& n) {
            G out(3);
            if (n[1]) out[1] = sum_to(where(in[0], g[0], 0.0), in[1].sizes());
            if (n[2]) out[2] = sum_to(where(logical_not(in[0]), g[0], 0.0), in[2].sizes());
            return out;
          });
  set_vjp(r, "mul_scalar", {},
          [](TensorList, TensorList, TensorList g, const Attrs& a, const Needs&) {
            return G{mul(g[0], a.get_double("other"))};
          });
  register_unary_vjps(r);
}

// The unary ops' vjps (X: reads the input; Y: reads the output).
void register_unary_vjps(OpRegistry& r) {
  const VjpReads X{{0}}, Y{{}, true};
  unary(r, "neg", {}, [](auto&, auto&, const Tensor& g, auto&) { return neg(g); });
  unary(r, "abs", X,
        [](const Tensor& x, auto&, const Tensor& g, auto&) { return mul(g, sign(x)); });
  unary(r, "exp", Y, [](auto&, const Tensor& y, const Tensor& g, auto&) { return mul(g, y); });
  unary(r, "log", X, [](const Tensor& x, auto&, const Tensor& g, auto&) { return div(g, x); });
  unary(r, "sqrt", Y,
        [](auto&, const Tensor& y, const Tensor& g, auto&) { return div(g, mul(y, 2.0)); });
  unary(r, "rsqrt", Y, [](auto&, const Tensor& y, const Tensor& g, auto&) {
    return mul(mul(g, mul(y, mul(y, y))), -0.5);
  });
  unary(r, "tanh", Y, [](auto&, const Tensor& y, const Tensor& g, auto&) {
    return mul(g, rsub(mul(y, y), 1.0));
  });
  unary(r, "sigmoid", Y, [](auto&, const Tensor& y, const Tensor& g, auto&) {
    return mul(g, mul(y, rsub(y, 1.0)));
  });
  unary(r, "erf", X, [](const Tensor& x, auto&, const Tensor& g, auto&) {
    return mul(g, mul(exp(neg(mul(x, x))), kTwoOverSqrtPi));
  });
  unary(r, "silu", X, [](const Tensor& x, auto&, const Tensor& g, auto&) {
    Tensor s = sigmoid(x);
    return mul(g, mul(s, add(mul(x, rsub(s, 1.0)), 1.0)));
  });
  unary(r, "relu", Y,
        [](auto&, const Tensor& y, const Tensor& g, auto&) { return where(gt(y, 0.0), g, 0.0); });
  unary(r, "hardtanh", X, [](const Tensor& x, auto&, const Tensor& g, const Attrs& a) {
    return where(gt(x, a.get_double("min_val")), where(lt(x, a.get_double("max_val")), g, 0.0),
                 0.0);
  });
  unary(r, "clamp", X, [](const Tensor& x, auto&, const Tensor& g, const Attrs& a) {
    Tensor r = g;
    if (a.has("min")) r = where(ge(x, a.get_double("min")), r, 0.0);
    if (a.has("max")) r = where(le(x, a.get_double("max")), r, 0.0);
    return r;
  });
  unary(r, "hardswish", X, [](const Tensor& x, auto&, const Tensor& g, auto&) {
    Tensor mid = mul(g, add(div(x, 3.0), 0.5));
    return where(lt(x, -3.0), mul(g, 0.0), where(le(x, 3.0), mid, g));
  });
  unary(r, "hardsigmoid", X, [](const Tensor& x, auto&, const Tensor& g, auto&) {
    return where(gt(x, -3.0), where(lt(x, 3.0), div(g, 6.0), 0.0), 0.0);
  });
  unary(r, "gelu", X, [](const Tensor& x, auto&, const Tensor& g, const Attrs& a) {
    if (a.get_string("approximate") == "tanh") {
      const double k = 0.7978845608028654, c = 0.044715;
      Tensor x2 = mul(x, x);
      Tensor t = tanh(mul(mul(x, add(mul(x2, c), 1.0)), k));
      Tensor dinner = mul(add(mul(x2, 3.0 * c), 1.0), k);
      Tensor d = add(mul(add(t, 1.0), 0.5), mul(mul(mul(x, rsub(mul(t, t), 1.0)), dinner), 0.5));
      return mul(g, d);
    }
    Tensor cdf = mul(add(erf(mul(x, kSqrt1_2)), 1.0), 0.5);
    Tensor pdf = mul(exp(mul(mul(x, x), -0.5)), kInvSqrt2Pi);
    return mul(g, add(cdf, mul(x, pdf)));
  });
}

}  // namespace lathe::detail
