// Neural-network ops: softmax, log_softmax, layer_norm, batch_norm, dropout, embedding, nll_loss.
#include <cmath>
#include <cstring>

#include "lathe/core/random.h"
#include "lathe/kernels/batch_norm.h"
#include "lathe/kernels/elementwise.h"
#include "lathe/kernels/norm.h"
#include "lathe/kernels/reduce.h"
#include "lathe/ops/autocast.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"
#include "lathe/ops/shape_util.h"

namespace lathe {
namespace {

// ---- softmax / log_softmax ----
ShapeRule softmax_rule(const char* name) {
  return [name](TensorList in, const Attrs& a) {
    const Tensor& x = in[0];
    const int64_t d = wrap_dim(a.get_int("dim"), x.dim(), name);
    LATHE_CHECK(is_floating(x.dtype()), "[", name, "] needs a floating input, got ",
                x.shape_string());
    TensorMeta m = result_meta(x.sizes(), x.dtype(), x.device());
    // Over the last dim the row kernel's result is row-major; over another the layout rule's.
    if (d == x.dim() - 1 || x.dim() == 0) m.strides = contiguous_strides(m.sizes);
    return std::vector<TensorMeta>{m};
  };
}

EagerKernel softmax_kernel(bool log) {
  return [log](TensorList in, const Attrs& a, const std::vector<TensorMeta>&) {
    const Tensor& x = in[0];
    if (x.dim() == 0) {
      Tensor out = empty({}, x.dtype());
      out.fill_(log ? 0.0 : 1.0);
      return std::vector<Tensor>{out};
    }
    int64_t d = wrap_dim(a.get_int("dim"), x.dim(), "softmax");
    Tensor xt = x.transpose(d, -1).contiguous();
    Tensor out = empty(xt.sizes(), x.dtype());
    int64_t R = xt.size(-1).expect_int();
    int64_t M = R ? xt.numel() / R : 0;
    if (M) kernels::softmax_rows(xt, out, M, R, log);
    if (d == x.dim() - 1) return std::vector<Tensor>{out};
    // Over another dim: the result takes the layout every op gives (alloc_output), as PyTorch
    // does, not the transposed one the row kernel wrote; tracing and lazy assume that layout.
    Tensor result = alloc_output(x.sizes(), x.dtype(), in);
    kernels::copy(result, out.transpose(d, -1));
    return std::vector<Tensor>{result};
  };
}

// ---- layer_norm (inputs: x, weight, bias) ----
std::vector<TensorMeta> layer_norm_rule(TensorList in, const Attrs& a) {
  const Tensor& x = in[0];
  auto ns = a.get_ints("normalized_shape");
  int64_t k = static_cast<int64_t>(ns.size());
  LATHE_CHECK(k >= 1 && k <= x.dim(), "[layer_norm] normalized_shape ", ns, " does not fit input ",
              x.shape_string());
  for (int64_t i = 0; i < k; ++i)
    LATHE_CHECK(x.size(x.dim() - k + i) == ns[i], "[layer_norm] normalized_shape ", ns,
                " does not match the last dims of input ", x.shape_string());
  LATHE_CHECK(is_floating(x.dtype()), "[layer_norm] needs a floating input, got ",
              x.shape_string());
  for (int i = 1; i <= 2; ++i) {
    if (!in[i].defined()) continue;
    LATHE_CHECK(in[i].shape() == ns, "[layer_norm] ", i == 1 ? "weight " : "bias ",
                in[i].shape_string(), " must have shape ", ns);
    LATHE_CHECK(in[i].dtype() == x.dtype(), "[layer_norm] ", i == 1 ? "weight " : "bias ",
                in[i].shape_string(), " has a different dtype from input ", x.shape_string());
  }
  TensorMeta m = result_meta(x.sizes(), x.dtype(), x.device());
  m.strides = contiguous_strides(m.sizes);  // the row kernel writes row-major
  return {m};
}

void layer_norm_out_kernel(TensorList in, const Attrs& a, const std::vector<TensorMeta>&,
                           TensorList outs) {
  Tensor x = in[0].contiguous();
  auto ns = a.get_ints("normalized_shape");
  int64_t R = 1;
  for (int64_t s : ns) R *= s;
  int64_t M = R ? x.numel() / R : 0;
  Tensor w = in[1].defined() ? in[1].contiguous() : Tensor();
  Tensor b = in[2].defined() ? in[2].contiguous() : Tensor();
  if (M && R) kernels::layer_norm_rows(x, w, b, outs[0], M, R, a.get_double("eps"));
}

std::vector<Tensor> layer_norm_kernel(TensorList in, const Attrs& a,
                                      const std::vector<TensorMeta>& m) {
  Tensor out = empty(in[0].sizes(), in[0].dtype());
  layer_norm_out_kernel(in, a, m, {&out, 1});
  return {out};
}

// Over the last dim (the hot case) the row kernel writes straight into the given output; over
// another dim the allocating kernel's result is copied.
OutKernel softmax_out_kernel(bool log) {
  return [log](TensorList in, const Attrs& a, const std::vector<TensorMeta>& m, TensorList outs) {
    const Tensor& x = in[0];
    if (x.dim() > 0 && wrap_dim(a.get_int("dim"), x.dim(), "softmax") == x.dim() - 1) {
      Tensor xc = x.contiguous();
      int64_t R = xc.size(-1).expect_int();
      int64_t M = R ? xc.numel() / R : 0;
      if (M) kernels::softmax_rows(xc, outs[0], M, R, log);
      return;
    }
    kernels::copy(outs[0], softmax_kernel(log)(in, a, m)[0]);
  };
}

// ---- batch_norm (inputs: x, running_mean, running_var, weight, bias) ----
std::vector<TensorMeta> batch_norm_rule(TensorList in, const Attrs& a) {
  const Tensor& x = in[0];
  LATHE_CHECK(x.dim() >= 2, "[batch_norm] input must have at least 2 dims (N, C, ...), got ",
              x.shape_string());
  LATHE_CHECK(is_floating(x.dtype()), "[batch_norm] needs a floating input, got ",
              x.shape_string());
  SymInt c = x.sizes()[1];
  const char* names[5] = {"input", "running_mean", "running_var", "weight", "bias"};
  for (int i = 1; i < 5; ++i) {
    if (!in[i].defined()) continue;
    LATHE_CHECK(in[i].dim() == 1 &&
                    (in[i].sizes()[0] == c).guard("[batch_norm] channels match the statistics"),
                "[batch_norm] ", names[i], " ", in[i].shape_string(), " must have shape [", c,
                "] for input ", x.shape_string());
  }
  bool training = a.get_bool("training");
  LATHE_CHECK(training || (in[1].defined() && in[2].defined()),
              "[batch_norm] inference needs running_mean and running_var");
  if (training) {
    // Values per channel: every dim but the channels (symbolic when the sizes are).
    SymInt per_channel = 1;
    for (int64_t d = 0; d < x.dim(); ++d)
      if (d != 1) per_channel = per_channel * x.sizes()[d];
    LATHE_CHECK((per_channel > 1)
                    .guard("[batch_norm] training needs more than one value per "
                           "channel"),
                "[batch_norm] training needs more than one value per channel, got input ",
                x.shape_string());
  }
  return {result_meta(x.sizes(), x.dtype(), x.device())};
}

std::vector<Tensor> batch_norm_kernel(TensorList in, const Attrs& a,
                                      const std::vector<TensorMeta>&) {
  const Tensor& x = in[0];
  const int64_t C = x.size(1).expect_int();
  const double eps = a.get_double("eps");
  const bool training = a.get_bool("training");
  auto values = [](const Tensor& t) { return t.to(DType::f64).contiguous().to_vector<double>(); };
  Tensor xd = kernels::channel_dense(x);
  std::vector<double> mean, var;  // the statistics used to normalize
  if (training) {
    kernels::channel_moments(xd, mean, var);
    if (in[1].defined() && in[2].defined()) {
      double m = a.get_double("momentum");
      double n = static_cast<double>(x.numel() / C);
      std::vector<double> old_m = values(in[1]), old_v = values(in[2]);
      Tensor new_m = empty({C}, DType::f64), new_v = empty({C}, DType::f64);
      for (int64_t c = 0; c < C; ++c) {
        new_m.data<double>()[c] = (1 - m) * old_m[c] + m * mean[c];
        new_v.data<double>()[c] = (1 - m) * old_v[c] + m * var[c] * n / (n - 1);
      }
      kernels::copy(in[1], new_m);
      kernels::copy(in[2], new_v);
    }
  } else {
    mean = values(in[1]);
    var = values(in[2]);
  }
  // y = x * scale + shift per channel.
  std::vector<double> scale(C), shift(C);
  std::vector<double> w = in[3].defined() ? values(in[3]) : std::vector<double>();
  std::vector<double> b = in[4].defined() ? values(in[4]) : std::vector<double>();
  for (int64_t c = 0; c < C; ++c) {
    double s = 1.0 / std::sqrt(var[c] + eps);
    if (!w.empty()) s *= w[c];
    scale[c] = s;
    shift[c] = (b.empty() ? 0.0 : b[c]) - mean[c] * s;
  }
  Tensor out = alloc_output(x.sizes(), x.dtype(), {&x, 1});
  Tensor y = out.int_strides() == xd.int_strides()
                 ? out
                 : empty_strided(xd.sizes(), xd.strides(), x.dtype());
  kernels::channel_affine(xd, scale, shift, y);
  if (!y.is_same(out)) kernels::copy(out, y);
  return {out};
}

// ---- batch_norm_functional: batch_norm without writing; outputs y, the new running_mean and
// the new running_var (what batch_norm in training writes into inputs 1 and 2) ----
enum BatchNormInput { kInput, kRunningMean, kRunningVar, kWeight, kBias };

std::vector<TensorMeta> batch_norm_functional_rule(TensorList in, const Attrs& a) {
  std::vector<TensorMeta> m = batch_norm_rule(in, a);
  LATHE_CHECK(in[kRunningMean].defined() && in[kRunningVar].defined(),
              "[batch_norm_functional] needs running_mean and running_var");
  for (int i : {kRunningMean, kRunningVar})
    m.push_back(result_meta(in[i].sizes(), in[i].dtype(), in[i].device()));
  return m;
}

std::vector<Tensor> batch_norm_functional_kernel(TensorList in, const Attrs& a,
                                                 const std::vector<TensorMeta>& m) {
  // The in-place kernel on fresh copies of the statistics: the same arithmetic, bit for bit.
  std::vector<Tensor> args(in.begin(), in.end());
  for (int i : {kRunningMean, kRunningVar}) {
    Tensor copy = empty(in[i].sizes(), in[i].dtype());
    kernels::copy(copy, in[i]);
    args[i] = copy;
  }
  std::vector<Tensor> out = batch_norm_kernel(args, a, m);
  out.push_back(args[kRunningMean]);
  out.push_back(args[kRunningVar]);
  return out;
}

// ---- dropout ----
std::vector<TensorMeta> dropout_rule(TensorList in, const Attrs& a) {
  double p = a.get_double("p");
  LATHE_CHECK(p >= 0 && p <= 1, "[dropout] probability must be in [0, 1], got ", p);
  LATHE_CHECK(is_floating(in[0].dtype()), "[dropout] needs a floating input, got ",
              in[0].shape_string());
  return {result_meta(in[0].sizes(), in[0].dtype(), in[0].device())};
}

std::vector<Tensor> dropout_kernel(TensorList in, const Attrs& a, const std::vector<TensorMeta>&) {
  const Tensor& x = in[0];
  double p = a.get_double("p");
  Tensor out = alloc_output(x.sizes(), x.dtype(), in);
  // A dropped element is x * 0 (PyTorch's mask multiply, and the traced x * mask): NaN for an
  // inf or NaN x, -0 for a negative one; never a plain 0 written over it.
  if (p == 1.0) {
    LATHE_DISPATCH_FLOATING(x.dtype(), "dropout", [&] {
      using T = scalar_t;
      kernels::map1<T, double>(out, x.to(DType::f64),
                               [](double v) { return static_cast<T>(v * 0.0); });
    });
    return {out};
  }
  Tensor u = rand(x.sizes(), DType::f64);
  double scale = 1.0 / (1.0 - p);
  LATHE_DISPATCH_FLOATING(x.dtype(), "dropout", [&] {
    using T = scalar_t;
    kernels::map2<T, double>(out, x.to(DType::f64), u, [&](double v, double r) {
      return static_cast<T>(r < p ? v * 0.0 : v * scale);
    });
  });
  return {out};
}

// ---- embedding (inputs: weight, indices) ----
std::vector<TensorMeta> embedding_rule(TensorList in, const Attrs&) {
  const Tensor& w = in[0];
  const Tensor& idx = in[1];
  LATHE_CHECK(w.dim() == 2, "[embedding] weight must be 2-d [num, dim], got ", w.shape_string());
  LATHE_CHECK(idx.dtype() == DType::i64 || idx.dtype() == DType::i32,
              "[embedding] indices must be i64 or i32, got ", idx.shape_string());
  Shape s = idx.sizes();
  s.push_back(w.sizes()[1]);
  return {result_meta(s, w.dtype(), w.device())};
}

std::vector<Tensor> embedding_kernel(TensorList in, const Attrs&,
                                     const std::vector<TensorMeta>& m) {
  Tensor w = in[0].contiguous();
  Tensor idx = in[1].to(DType::i64).contiguous();
  const int64_t num = w.size(0).expect_int(), dim = w.size(1).expect_int();
  const int64_t n = idx.numel();
  const int64_t* pi = idx.data<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    LATHE_CHECK(pi[i] >= 0 && pi[i] < num, "[embedding] index ", pi[i],
                " is out of range for weight ", in[0].shape_string(), " (valid: 0..", num - 1, ")");
  Tensor out = empty(m[0].sizes, w.dtype());
  size_t row = static_cast<size_t>(dim) * itemsize(w.dtype());
  const char* src = static_cast<const char*>(w.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * row, src + pi[i] * row, row);
  return {out};
}

// ---- nll_loss (inputs: log_probs [N, C] or [C], target [N] or []) ----
std::vector<TensorMeta> nll_rule(TensorList in, const Attrs& a) {
  const Tensor& lp = in[0];
  const Tensor& t = in[1];
  LATHE_CHECK(lp.dim() == 1 || lp.dim() == 2, "[nll_loss] input must be [N, C] or [C], got ",
              lp.shape_string());
  LATHE_CHECK(is_floating(lp.dtype()), "[nll_loss] input must be floating, got ",
              lp.shape_string());
  LATHE_CHECK(t.dtype() == DType::i64 || t.dtype() == DType::i32,
              "[nll_loss] target must hold class indices (i64), got ", t.shape_string());
  if (lp.dim() == 2)
    LATHE_CHECK(t.dim() == 1 && t.sizes()[0] == lp.sizes()[0], "[nll_loss] target ",
                t.shape_string(), " must be [N] for input ", lp.shape_string());
  else
    LATHE_CHECK(t.dim() == 0, "[nll_loss] target ", t.shape_string(), " must be 0-d for input ",
                lp.shape_string());
  const std::string& r = a.get_string("reduction");
  LATHE_CHECK(r == "mean" || r == "sum" || r == "none",
              "[nll_loss] reduction must be mean, sum or none, got '", r, "'");
  Shape s = r == "none" ? t.sizes() : Shape{};
  return {result_meta(s, lp.dtype(), lp.device())};
}

std::vector<Tensor> nll_kernel(TensorList in, const Attrs& a, const std::vector<TensorMeta>& m) {
  Tensor lp = in[0].dim() == 1 ? in[0].unsqueeze(0) : in[0];
  Tensor t = (in[1].dim() == 0 ? in[1].unsqueeze(0) : in[1]).to(DType::i64).contiguous();
  lp = lp.to(DType::f64).contiguous();
  const int64_t N = lp.size(0).expect_int(), C = lp.size(1).expect_int();
  const int64_t ignore = a.get_int("ignore_index");
  const std::string& r = a.get_string("reduction");
  std::vector<double> per(N, 0.0);
  double total = 0, count = 0;
  for (int64_t i = 0; i < N; ++i) {
    int64_t c = t.data<int64_t>()[i];
    if (c == ignore) continue;
    LATHE_CHECK(c >= 0 && c < C, "[nll_loss] target ", c, " is out of range for ", C, " classes");
    per[i] = -lp.data<double>()[i * C + c];
    total += per[i];
    count += 1;
  }
  Tensor out;
  if (r == "none")
    out = from_vector(per, {N}).view(m[0].sizes);
  else if (r == "sum")
    out = full({}, total, DType::f64);
  else
    out = full({}, count > 0 ? total / count : std::nan(""), DType::f64);
  return {out.to(m[0].dtype)};
}

}  // namespace

namespace detail {
void register_nn_ops(OpRegistry& r) {
  using T = AttrType;
  using C = OpCategory;
  for (bool log : {false, true}) {
    const char* name = log ? "log_softmax" : "softmax";
    OpDef op = define_op(name, 1, softmax_rule(name), softmax_kernel(log), C::normalization,
                         {required("dim", T::integer)});
    r.add(std::move(op), softmax_out_kernel(log));
  }
  OpDef ln = define_op("layer_norm", 3, layer_norm_rule, layer_norm_kernel, C::normalization,
                       {required("normalized_shape", T::int_list), required("eps", T::real)});
  r.add(std::move(ln), layer_norm_out_kernel);
  const std::vector<AttrSpec> bn_attrs{required("training", T::boolean),
                                       required("momentum", T::real), required("eps", T::real)};
  OpDef bn =
      define_op("batch_norm", 5, batch_norm_rule, batch_norm_kernel, C::normalization, bn_attrs);
  // Training updates running_mean and running_var in place; inference reads them only.
  bn.mutated_inputs = {kRunningMean, kRunningVar};
  bn.mutates_when = [](const Attrs& a) { return a.get_bool("training"); };
  bn.functional_variant = "batch_norm_functional";
  r.add(std::move(bn));
  r.add(define_op("batch_norm_functional", 5, batch_norm_functional_rule,
                  batch_norm_functional_kernel, C::normalization, bn_attrs));
  r.add(define_op("dropout", 1, dropout_rule, dropout_kernel, C::random, {required("p", T::real)}));
  r.add(define_op("embedding", 2, embedding_rule, embedding_kernel, C::other, {}));
  r.add(define_op("nll_loss", 2, nll_rule, nll_kernel, C::other,
                  {required("reduction", T::string), required("ignore_index", T::integer)}));
}
}  // namespace detail

Tensor softmax(const Tensor& x, int64_t dim) {
  return dispatch1(LATHE_OP("softmax"), {&x, 1}, Attrs{{"dim", dim}});
}
Tensor log_softmax(const Tensor& x, int64_t dim) {
  return dispatch1(LATHE_OP("log_softmax"), {&x, 1}, Attrs{{"dim", dim}});
}
Tensor layer_norm(const Tensor& x, std::vector<int64_t> normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  Tensor in[3] = {x, weight, bias};
  return dispatch1(LATHE_OP("layer_norm"), in,
                   Attrs{{"normalized_shape", to_shape(normalized_shape)}, {"eps", eps}});
}
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  Tensor in[5] = {x, running_mean, running_var, weight, bias};
  return dispatch1(LATHE_OP("batch_norm"), in,
                   Attrs{{"training", training}, {"momentum", momentum}, {"eps", eps}});
}
Tensor dropout(const Tensor& x, double p, bool training) {
  if (!training || p == 0.0) {
    LATHE_CHECK(p >= 0 && p <= 1, "[dropout] probability must be in [0, 1], got ", p);
    return x;
  }
  return dispatch1(LATHE_OP("dropout"), {&x, 1}, Attrs{{"p", p}});
}
Tensor embedding(const Tensor& weight, const Tensor& indices) {
  Tensor in[2] = {weight, indices};
  return dispatch1(LATHE_OP("embedding"), in, Attrs{});
}
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const std::string& reduction,
                int64_t ignore_index) {
  Tensor in[2] = {log_probs, target};
  return dispatch1(LATHE_OP("nll_loss"), in,
                   Attrs{{"reduction", reduction}, {"ignore_index", ignore_index}});
}
Tensor cross_entropy(const Tensor& logits_in, const Tensor& target, const std::string& reduction,
                     int64_t ignore_index) {
  // PyTorch's autocast lists cross_entropy as fp32 as a whole: log_softmax runs in f32 too.
  const Tensor logits = autocast_to_f32(logits_in);
  LATHE_CHECK(logits.dim() == 1 || logits.dim() == 2,
              "[cross_entropy] input must be [N, C] or [C], got ", logits.shape_string());
  LATHE_CHECK(target.dtype() == DType::i64 || target.dtype() == DType::i32,
              "[cross_entropy] target must hold class indices (i64), got ", target.shape_string());
  LATHE_CHECK(logits.dim() == 2 ? (target.dim() == 1 && target.size(0) == logits.size(0))
                                : target.dim() == 0,
              "[cross_entropy] target ", target.shape_string(), " does not match input ",
              logits.shape_string(), " (expected [N] for [N, C], or 0-d for [C])");
  return nll_loss(log_softmax(logits, logits.dim() - 1), target, reduction, ignore_index);
}

}  // namespace lathe
