// vjp rules of the contraction, pooling, normalization, softmax, dropout, embedding and loss ops,
// and register_vjps, which attaches every rule once the ops are registered.
#include "lathe/core/random.h"
#include "lathe/ops/backward_ops.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"
#include "lathe/ops/shape_util.h"
#include "lathe/ops/vjp_util.h"

namespace lathe::detail {
namespace {

using G = std::vector<Tensor>;
using Needs = std::vector<bool>;

// 3-d (unbatched) conv / pool operands as 4-d.
Tensor batched(const Tensor& t) { return t.dim() == 3 ? t.unsqueeze(0) : t; }

// The gradient of x through normalization over `dims` with batch statistics:
// xhat = (x - mean) * rstd, gxhat = dL/dxhat.
Tensor normalized_grad(const Tensor& gxhat, const Tensor& xhat, const Tensor& rstd,
                       const std::vector<int64_t>& dims) {
  return mul(rstd, sub(sub(gxhat, mean(gxhat, dims, true)),
                       mul(xhat, mean(mul(gxhat, xhat), dims, true))));
}

G matmul_vjp(TensorList in, TensorList, TensorList g, const Attrs&, const Needs& n) {
  const Tensor &a = in[0], &b = in[1];
  Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  Tensor g2 = g[0];
  if (a.dim() == 1 && b.dim() == 1) {
    g2 = g2.reshape({1, 1});
  } else if (a.dim() == 1) {
    g2 = g2.unsqueeze(-2);
  } else if (b.dim() == 1) {
    g2 = g2.unsqueeze(-1);
  }
  G out(2);
  if (n[0]) out[0] = sum_to(matmul(g2, b2.transpose(-2, -1)), a2.sizes()).reshape(a.sizes());
  if (n[1]) out[1] = sum_to(matmul(a2.transpose(-2, -1), g2), b2.sizes()).reshape(b.sizes());
  return out;
}

G linear_vjp(TensorList in, TensorList, TensorList g, const Attrs&, const Needs& n) {
  const Tensor &x = in[0], &w = in[1];
  G out(3);
  if (n[0]) out[0] = matmul(g[0], w);
  if (n[1]) {
    Tensor g2 = g[0].reshape({-1, w.sizes()[0]});
    Tensor x2 = x.reshape({-1, w.sizes()[1]});
    out[1] = matmul(g2.t(), x2);
  }
  if (n[2]) out[2] = sum_to(g[0], in[2].sizes());
  return out;
}

G conv2d_vjp(TensorList in, TensorList, TensorList g, const Attrs& a, const Needs& n) {
  const Tensor &x = in[0], &w = in[1];
  Tensor xb = batched(x), gb = batched(g[0]);
  G out(3);
  if (n[0]) out[0] = conv2d_backward_input(gb, w, xb.sizes(), a).reshape(x.sizes());
  if (n[1]) out[1] = conv2d_backward_weight(gb, xb, w.sizes(), a);
  if (n[2]) out[2] = sum(gb, {0, 2, 3});
  return out;
}

G layer_norm_vjp(TensorList in, TensorList, TensorList g, const Attrs& a, const Needs& n) {
  const Tensor &x = in[0], &w = in[1], &b = in[2];
  const int64_t k = static_cast<int64_t>(a.get_ints("normalized_shape").size());
  std::vector<int64_t> dims;
  for (int64_t d = x.dim() - k; d < x.dim(); ++d) dims.push_back(d);
  Tensor mu = mean(x, dims, true);
  Tensor rstd = rsqrt(add(var(x, dims, 0, true), a.get_double("eps")));
  Tensor xhat = mul(sub(x, mu), rstd);
  G out(3);
  if (n[1]) out[1] = sum_to(mul(g[0], xhat), w.sizes());
  if (n[2]) out[2] = sum_to(g[0], b.sizes());
  if (n[0]) out[0] = normalized_grad(w.defined() ? mul(g[0], w) : g[0], xhat, rstd, dims);
  return out;
}

// Inputs: x, running_mean, running_var, weight, bias. Training: batch_norm_backward (the batch
// statistics' terms in a few passes); inference: the composition with the running statistics.
G batch_norm_vjp(TensorList in, TensorList, TensorList g, const Attrs& a, const Needs& n) {
  const Tensor &x = in[0], &w = in[3];
  const double eps = a.get_double("eps");
  G out(5);
  if (a.get_bool("training")) {
    G r = batch_norm_backward(g[0], x, w, eps);
    if (n[0]) out[0] = r[0];
    if (n[3]) out[3] = r[1];
    if (n[4]) out[4] = r[2];
    return out;
  }
  std::vector<int64_t> dims{0};
  Shape channel(x.dim(), 1);
  channel[1] = x.sizes()[1];
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  Tensor mu = in[1].reshape(channel);
  Tensor rstd = rsqrt(add(in[2].reshape(channel), eps));
  Tensor xhat = mul(sub(x, mu), rstd);
  if (n[3]) out[3] = sum(mul(g[0], xhat), dims);
  if (n[4]) out[4] = sum(g[0], dims);
  if (n[0]) out[0] = mul(w.defined() ? mul(g[0], w.reshape(channel)) : g[0], rstd);
  return out;
}

// The mask is not saved: the generator is put back where the forward drew it, and the same
// draws on a tensor of ones give the mask scaled by 1/(1-p).
G dropout_vjp(TensorList in, TensorList, TensorList g, const Attrs& a, const Needs&) {
  Generator& gen = default_generator();
  const Generator::State now = gen.state();
  gen.set_state({static_cast<uint64_t>(a.get_int("rng_seed")),
                 static_cast<uint64_t>(a.get_int("rng_offset"))});
  Tensor mask;
  try {
    mask = dropout(on_device_of(full(in[0].sizes(), 1.0, in[0].dtype()), in[0]), a.get_double("p"),
                   true);
  } catch (...) {
    gen.set_state(now);
    throw;
  }
  gen.set_state(now);
  return G{mul(g[0], mask)};
}

G nll_loss_vjp(TensorList in, TensorList, TensorList g, const Attrs& a, const Needs&) {
  const Tensor &lp = in[0], &target = in[1];
  const DType dt = lp.dtype();
  const SymInt C = lp.sizes().back();
  Tensor t = lp.dim() == 1 ? target.reshape({1}) : target;
  Tensor classes = on_device_of(arange(C.expect_int()), t).reshape({1, C});
  Tensor picked = eq(t.unsqueeze(1), classes).to(dt);
  Tensor valid = ne(t, static_cast<double>(a.get_int("ignore_index"))).to(dt);
  picked = mul(picked, valid.unsqueeze(1));
  const std::string& reduction = a.get_string("reduction");
  Tensor scale = g[0];
  if (reduction == "none") {
    scale = scale.reshape({-1, 1});
  } else if (reduction == "mean") {
    scale = div(scale, sum(valid));
  }
  return G{neg(mul(picked, scale)).reshape(lp.sizes())};
}

}  // namespace

void register_nn_vjps(OpRegistry& r) {
  set_vjp(r, "matmul", {{0, 1}}, matmul_vjp);
  set_vjp(r, "linear", {{0, 1}}, linear_vjp);
  set_vjp(r, "conv2d", {{0, 1}}, conv2d_vjp);
  set_vjp(r, "max_pool2d", {{0}},
          [](TensorList in, TensorList, TensorList g, const Attrs& a, const Needs&) {
            const Tensor& x = in[0];
            return G{max_pool2d_backward(batched(g[0]), batched(x), a).reshape(x.sizes())};
          });
  set_vjp(r, "avg_pool2d", {},
          [](TensorList in, TensorList, TensorList g, const Attrs& a, const Needs&) {
            const Tensor& x = in[0];
            return G{avg_pool2d_backward(batched(g[0]), batched(x).sizes(), a).reshape(x.sizes())};
          });
  set_vjp(r, "adaptive_avg_pool2d", {},
          [](TensorList in, TensorList, TensorList g, const Attrs&, const Needs&) {
            const Tensor& x = in[0];
            return G{
                adaptive_avg_pool2d_backward(batched(g[0]), batched(x).sizes()).reshape(x.sizes())};
          });
  set_vjp(r, "softmax", {{}, true},
          [](TensorList, TensorList y, TensorList g, const Attrs& a, const Needs&) {
            const int64_t d = a.get_int("dim");
            return G{mul(y[0], sub(g[0], sum(mul(g[0], y[0]), {d}, true)))};
          });
  set_vjp(r, "log_softmax", {{}, true},
          [](TensorList, TensorList y, TensorList g, const Attrs& a, const Needs&) {
            const int64_t d = a.get_int("dim");
            return G{sub(g[0], mul(exp(y[0]), sum(g[0], {d}, true)))};
          });
  set_vjp(r, "layer_norm", {{0, 1}}, layer_norm_vjp);
  set_vjp(r, "batch_norm", {{0, 3}}, batch_norm_vjp);
  // Inference reads the running statistics; training does not (a second training forward
  // through the same module updates them, which must not invalidate the first one's graph).
  r.get_mutable("batch_norm").vjp_reads_input = [](int i, const Attrs& a) {
    return i == 0 || i == 3 || (!a.get_bool("training") && (i == 1 || i == 2));
  };
  set_vjp(r, "dropout", {}, dropout_vjp);
  set_vjp(r, "embedding", {{1}},
          [](TensorList in, TensorList, TensorList g, const Attrs&, const Needs&) {
            return G{embedding_backward(g[0], in[1], in[0].sizes()[0].expect_int()), Tensor()};
          });
  set_vjp(r, "nll_loss", {{1}}, nll_loss_vjp);
}

void register_vjps(OpRegistry& r) {
  register_elementwise_vjps(r);
  register_shape_vjps(r);
  register_nn_vjps(r);
}

}  // namespace lathe::detail
