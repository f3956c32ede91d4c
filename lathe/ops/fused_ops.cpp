// Fused ops that the optimizing backend's passes produce (they are ordinary ops: eager can run
// them too, the verifier checks them, the printer shows them).
//
// conv2d_fused(x, weight, bias, bn_mean, bn_var, bn_weight, bn_bias, residual):
//   y = conv2d(x, weight, bias)                                  (attrs as conv2d)
//   y = batch_norm(y, bn_mean, bn_var, bn_weight, bn_bias, eps)  (inference; when bn_mean given)
//   y = act(y); y = y + residual (when given); y = act2(y)
// act / act2 are "none", "relu", "clip" (clamp to [act_min, act_max]: relu6, hardtanh), "gelu"
// or "gelu_tanh".
//
// linear_fused(x, weight, bias, residual): y = act(linear(x, weight, bias)); y += residual (when
// given); act as above; one oneDNN matmul with post-ops. The
// batch norm is folded into the convolution's weight and bias (computed in f64 and cached
// against the six tensors' storages and versions, so an in-place update of any of them refolds),
// and the rest runs as oneDNN post-ops: one pass over the output instead of four.
#include <algorithm>
#include <cmath>
#include <list>
#include <memory>
#include <mutex>
#include <optional>

#include "lathe/kernels/blocked_layout.h"
#include "lathe/kernels/dnnl_conv.h"
#include "lathe/kernels/dnnl_conv_dw.h"
#include "lathe/kernels/dnnl_matmul.h"
#include "lathe/kernels/dnnl_pool.h"
#include "lathe/kernels/elementwise.h"
#include "lathe/kernels/pointwise_program.h"
#include "lathe/ops/bn_fold_cache.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"
#include "lathe/ops/shape_util.h"

namespace lathe {
namespace {

enum Input { kX, kWeight, kBias, kMean, kVar, kGamma, kBeta, kResidual, kNumInputs };

detail::PostOps::Act parse_act(const Attrs& a, const char* name, const char* op = "conv2d_fused") {
  const std::string& s = a.get_string(name);
  if (s == "none") return detail::PostOps::Act::none;
  if (s == "relu") return detail::PostOps::Act::relu;
  if (s == "clip") return detail::PostOps::Act::clip;
  if (s == "gelu") return detail::PostOps::Act::gelu_erf;
  if (s == "gelu_tanh") return detail::PostOps::Act::gelu_tanh;
  throw Error(detail::str("[", op, "] ", name,
                          " must be none, relu, clip, gelu or gelu_tanh, got '", s, "'"));
}

// conv2d_fused's parsed attributes: conv2d's, the post-ops and the batch-norm eps.
struct Conv2dFusedAttrs final : detail::Conv2dAttrs {
  detail::ConvPostOps post;   // `sum` set per call
  std::optional<double> eps;  // absent without batch norm
};

struct LinearFusedAttrs final : ParsedAttrs {
  detail::PostOps::Act act = detail::PostOps::Act::none;
  bool bf16 = false;  // the "precision" attribute
};

// The planned executor may hand a fused op its dying residual as the output (in_place_input):
// then the residual is already where the sum post-op reads it.
bool same_memory(const Tensor& a, const Tensor& b) {
  return a.impl().storage == b.impl().storage && a.storage_offset() == b.storage_offset() &&
         a.sizes() == b.sizes() && a.strides() == b.strides();
}

detail::ConvPostOps post_ops(const Attrs& a, bool residual) {
  if (const auto* parsed = a.parsed<Conv2dFusedAttrs>()) {
    detail::ConvPostOps p = parsed->post;
    p.sum = residual;
    return p;
  }
  detail::ConvPostOps p;
  p.act = parse_act(a, "act");
  p.act_lo = static_cast<float>(a.get_double("act_min"));
  p.act_hi = static_cast<float>(a.get_double("act_max"));
  p.sum = residual;
  p.act2 = parse_act(a, "act2");
  p.act2_lo = static_cast<float>(a.get_double("act2_min"));
  p.act2_hi = static_cast<float>(a.get_double("act2_max"));
  return p;
}

double bn_eps(const Attrs& a) {
  const auto* parsed = a.parsed<Conv2dFusedAttrs>();
  if (parsed && parsed->eps) return *parsed->eps;
  return a.get_double("eps");
}

std::shared_ptr<const ParsedAttrs> parse_conv2d_fused_attrs(const Attrs& a) {
  auto parsed = std::make_shared<Conv2dFusedAttrs>();
  parsed->params = detail::conv_params(a);
  parsed->post = post_ops(a, false);
  if (a.has("eps")) parsed->eps = a.get_double("eps");
  return parsed;
}

detail::PostOps::Act linear_act(const Attrs& a) {
  if (const auto* parsed = a.parsed<LinearFusedAttrs>()) return parsed->act;
  return parse_act(a, "act", "linear_fused");
}

std::vector<TensorMeta> conv2d_fused_rule(TensorList in, const Attrs& a) {
  LATHE_CHECK(in.size() == kNumInputs, "[conv2d_fused] takes ", int(kNumInputs), " inputs, got ",
              in.size());
  std::vector<TensorMeta> m = LATHE_OP("conv2d").shape(in.subspan(0, 3), a);
  const SymInt O = in[kWeight].sizes()[0];
  const bool bn = in[kMean].defined();
  LATHE_CHECK(bn == in[kVar].defined(), "[conv2d_fused] bn_mean and bn_var come together");
  LATHE_CHECK(bn || (!in[kGamma].defined() && !in[kBeta].defined()),
              "[conv2d_fused] bn_weight / bn_bias need bn_mean and bn_var");
  const char* names[] = {"", "", "", "bn_mean", "bn_var", "bn_weight", "bn_bias"};
  for (int i = kMean; i <= kBeta; ++i) {
    if (!in[i].defined()) continue;
    LATHE_CHECK(in[i].dim() == 1 && in[i].sizes()[0] == O, "[conv2d_fused] ", names[i], " ",
                in[i].shape_string(), " must have shape [", O, "] (out_channels)");
    LATHE_CHECK(in[i].dtype() == in[kX].dtype(), "[conv2d_fused] ", names[i], " ",
                in[i].shape_string(), " must have the input's dtype ", dtype_name(in[kX].dtype()));
  }
  if (bn) LATHE_CHECK(bn_eps(a) >= 0, "[conv2d_fused] eps must be non-negative");
  const Tensor& r = in[kResidual];
  if (r.defined())
    LATHE_CHECK(r.sizes() == m[0].sizes && r.dtype() == m[0].dtype, "[conv2d_fused] residual ",
                r.shape_string(), " must have the output's shape and dtype (input ",
                in[kX].shape_string(), ", weight ", in[kWeight].shape_string(), ")");
  post_ops(a, false);  // validates the activation names
  return m;
}

Tensor batched(const Tensor& t) { return t.dim() == 4 ? t : t.unsqueeze(0); }

void conv2d_fused_out_kernel(TensorList in, const Attrs& a, const std::vector<TensorMeta>&,
                             TensorList outs) {
  Tensor w = in[kWeight], b = in[kBias];
  if (in[kMean].defined()) {
    const Tensor ts[6] = {in[kWeight], in[kBias], in[kMean], in[kVar], in[kGamma], in[kBeta]};
    std::tie(w, b) = detail::folded_weight_bias(ts, bn_eps(a));
  }
  const Tensor& out = outs[0];
  const bool residual = in[kResidual].defined();
  if (residual && !same_memory(out, in[kResidual])) kernels::copy(out, in[kResidual]);
  detail::conv2d_forward(batched(in[kX]), w, b, detail::conv_params(a), batched(out),
                         post_ops(a, residual));
}

// ---- linear_fused(x, weight, bias, residual): y = act(linear(x, weight, bias)) [+ residual] ----

enum LinearInput { kLx, kLweight, kLbias, kLresidual, kLinearInputs };

std::vector<TensorMeta> linear_fused_rule(TensorList in, const Attrs& a) {
  LATHE_CHECK(in.size() == kLinearInputs, "[linear_fused] takes ", int(kLinearInputs),
              " inputs, got ", in.size());
  std::vector<TensorMeta> m = LATHE_OP("linear").shape(in.subspan(0, 3), a);
  const Tensor& r = in[kLresidual];
  if (r.defined())
    LATHE_CHECK(r.sizes() == m[0].sizes && r.dtype() == m[0].dtype, "[linear_fused] residual ",
                r.shape_string(), " must have the output's shape and dtype (input ",
                in[kLx].shape_string(), ", weight ", in[kLweight].shape_string(), ")");
  linear_act(a);  // validates the activation name
  return m;
}

void linear_fused_out_kernel(TensorList in, const Attrs& a, const std::vector<TensorMeta>&,
                             TensorList outs) {
  const Tensor& out = outs[0];
  const bool residual = in[kLresidual].defined();
  if (residual && !same_memory(out, in[kLresidual])) kernels::copy(out, in[kLresidual]);
  const int64_t K = in[kLweight].size(1).expect_int(), N = in[kLweight].size(0).expect_int();
  Tensor x2 = in[kLx].reshape({-1, K});
  Tensor o2 = out.view({-1, N});
  detail::PostOps post;
  post.act = linear_act(a);
  post.sum = residual;
  const auto* parsed = a.parsed<LinearFusedAttrs>();
  const bool bf16 = parsed ? parsed->bf16 : detail::precision_bf16(a, "linear_fused");
  detail::linear_forward(x2, in[kLweight], in[kLbias], o2, post, bf16);
}

// The allocating form of an out kernel whose output the shape rule describes (with strides).
EagerKernel allocating(OutKernel out_kernel) {
  return [out_kernel](TensorList in, const Attrs& a, const std::vector<TensorMeta>& m) {
    std::vector<Tensor> outs{empty_strided(m[0].sizes, m[0].strides, m[0].dtype)};
    out_kernel(in, a, m, outs);
    return outs;
  };
}

// ---- oneDNN's channel-blocked layouts (nChw8c / nChw16c), which the cpu backend's plan_layouts
// pass keeps between convolutions: a value in one is a contiguous [N, C/B, H, W, B] tensor, the
// block B (8 or 16) its last size ----

// The block of a blocked value (its last size), checked.
int64_t check_blocked(const Tensor& t, const char* op, const char* what) {
  const std::optional<int64_t> b = t.dim() == 5 ? t.sizes()[4].maybe_int() : std::nullopt;
  LATHE_CHECK(t.dtype() == DType::f32 && (b == 8 || b == 16), "[", op, "] ", what,
              " must be f32 [N, C/B, H, W, B] with a block B of 8 or 16, got ", t.shape_string());
  return *b;
}

std::vector<TensorMeta> to_blocked_rule(TensorList in, const Attrs& a) {
  const Tensor& x = in[0];
  const int64_t block = a.get_int("block");
  LATHE_CHECK(block == 8 || block == 16, "[to_blocked] block must be 8 or 16, got ", block);
  LATHE_CHECK(x.dim() == 4 && x.dtype() == DType::f32 && x.sizes()[1].expect_int() % block == 0,
              "[to_blocked] takes f32 [N, C, H, W] with C a multiple of the block ", block,
              ", got ", x.shape_string());
  auto z = x.shape();
  Shape sizes = to_shape({z[0], z[1] / block, z[2], z[3], block});
  TensorMeta m;
  m.strides = contiguous_strides(sizes);
  m.sizes = std::move(sizes);
  m.dtype = x.dtype();
  m.device = x.device();
  return {m};
}

void to_blocked_out_kernel(TensorList in, const Attrs&, const std::vector<TensorMeta>&,
                           TensorList outs) {
  kernels::to_blocked(in[0], outs[0]);
}

std::vector<TensorMeta> from_blocked_rule(TensorList in, const Attrs&) {
  const int64_t block = check_blocked(in[0], "from_blocked", "the input");
  const Tensor& x = in[0];
  auto z = x.shape();
  Shape sizes = to_shape({z[0], z[1] * block, z[2], z[3]});
  TensorMeta m;
  m.strides = channels_last_strides(sizes);
  m.sizes = std::move(sizes);
  m.dtype = x.dtype();
  m.device = x.device();
  return {m};
}

void from_blocked_out_kernel(TensorList in, const Attrs&, const std::vector<TensorMeta>&,
                             TensorList outs) {
  kernels::from_blocked(in[0], outs[0]);
}

// conv2d_blocked(x, weight, bias, residual): conv2d_fused without batch norm on blocked values
// (the output has the input's block). A plain 4-d x (a network's first convolution, whose few
// input channels fill no block) is read as it is and the output takes the attribute "block".
enum BlockedInput { kBx, kBweight, kBbias, kBresidual, kBlockedInputs };

std::vector<TensorMeta> conv2d_blocked_rule(TensorList in, const Attrs& a) {
  LATHE_CHECK(in.size() == kBlockedInputs, "[conv2d_blocked] takes ", int(kBlockedInputs),
              " inputs, got ", in.size());
  const Tensor& x = in[kBx];
  const bool plain = x.defined() && x.dim() == 4;
  int64_t block = 0;
  if (plain) {
    LATHE_CHECK(x.dtype() == DType::f32 && a.has("block") &&
                    (a.get_int("block") == 8 || a.get_int("block") == 16) &&
                    !in[kBresidual].defined() && a.get_int("groups") == 1,
                "[conv2d_blocked] a plain f32 [N, C, H, W] x needs the attribute block = 8 or 16 "
                "for its output, one group and no residual; got x ",
                x.shape_string(), a.has("block") ? "" : " and no block");
    block = a.get_int("block");
  } else {
    block = check_blocked(x, "conv2d_blocked", "x");
    LATHE_CHECK(!a.has("block") || a.get_int("block") == block, "[conv2d_blocked] block ",
                a.has("block") ? a.get_int("block") : 0, " differs from x's block ", block);
  }
  const Tensor& w = in[kBweight];
  LATHE_CHECK(w.dim() == 4 && w.sizes()[0].expect_int() % block == 0,
              "[conv2d_blocked] weight must be [O, C/groups, KH, KW] with O a multiple of the "
              "block ",
              block, ", got ", w.shape_string());
  auto z = x.shape();
  Tensor x4 = empty_strided(plain ? x.sizes() : to_shape({z[0], z[1] * block, z[2], z[3]}),
                            to_shape({0, 0, 0, 0}),
                            x.dtype());  // sizes only, for conv2d's rule
  std::vector<Tensor> conv_in{x4, w, in[kBbias]};
  std::vector<TensorMeta> m = LATHE_OP("conv2d").shape(conv_in, a);
  auto os = to_ints(m[0].sizes);
  Shape sizes = to_shape({os[0], os[1] / block, os[2], os[3], block});
  const Tensor& r = in[kBresidual];
  if (r.defined())
    LATHE_CHECK(r.sizes() == sizes && r.dtype() == x.dtype(), "[conv2d_blocked] residual ",
                r.shape_string(), " must have the output's blocked shape");
  post_ops(a, false);
  if (a.has("algorithm")) {
    const std::string& alg = a.get_string("algorithm");
    LATHE_CHECK(alg == "direct" || alg == "winograd",
                "[conv2d_blocked] algorithm must be \"direct\" or \"winograd\", got \"", alg, "\"");
  }
  m[0].strides = contiguous_strides(sizes);
  m[0].sizes = std::move(sizes);
  m[0].device = x.device();
  return m;
}

// Writes into outs[0], which may be a slice of a larger buffer (the planned executor places a
// concat's inputs in their slices of its output) as long as it is contiguous.
void conv2d_blocked_out_kernel(TensorList in, const Attrs& a, const std::vector<TensorMeta>&,
                               TensorList outs) {
  const Tensor& out = outs[0];
  const bool residual = in[kBresidual].defined();
  if (residual && !same_memory(out, in[kBresidual])) kernels::copy(out, in[kBresidual]);
  detail::Conv2dParams p = detail::conv_params(a);
  p.winograd = a.has("algorithm") && a.get_string("algorithm") == "winograd";
  detail::conv2d_forward_blocked(in[kBx].contiguous(), in[kBweight], in[kBbias], p, out,
                                 post_ops(a, residual));
}

// conv2d_1x1_dw_blocked(x, weight, bias, dw_weight, dw_bias): a 1x1 conv2d_blocked (act) and
// the 3x3 depthwise one (stride dw_stride, padding 1, dw_act) that reads it, as one oneDNN
// primitive (the cpu backend's fuse_dw_conv); the output has the input's block.
enum DwInput { kDx, kDweight, kDbias, kDdwWeight, kDdwBias, kDwInputs };

detail::PostOps dw_post_ops(const Attrs& a) {
  const char* op = "conv2d_1x1_dw_blocked";
  detail::PostOps p;
  p.act = parse_act(a, "act", op);
  p.act_lo = static_cast<float>(a.get_double("act_min"));
  p.act_hi = static_cast<float>(a.get_double("act_max"));
  p.act2 = parse_act(a, "dw_act", op);
  p.act2_lo = static_cast<float>(a.get_double("dw_act_min"));
  p.act2_hi = static_cast<float>(a.get_double("dw_act_max"));
  return p;
}

std::vector<TensorMeta> conv2d_1x1_dw_blocked_rule(TensorList in, const Attrs& a) {
  const char* op = "conv2d_1x1_dw_blocked";
  LATHE_CHECK(in.size() == kDwInputs, "[", op, "] takes ", int(kDwInputs), " inputs, got ",
              in.size());
  const int64_t block = check_blocked(in[kDx], op, "x");
  const Tensor& x = in[kDx];
  const Tensor& w = in[kDweight];
  const Tensor& dw = in[kDdwWeight];
  auto z = x.shape();
  LATHE_CHECK(w.dim() == 4 && w.sizes()[1] == z[1] * block && w.sizes()[2] == 1 &&
                  w.sizes()[3] == 1 && w.sizes()[0].expect_int() % block == 0,
              "[", op, "] weight must be [M, C, 1, 1] with C the input's ", z[1] * block,
              " channels and M a multiple of the block ", block, ", got ", w.shape_string());
  const SymInt M = w.sizes()[0];
  LATHE_CHECK(dw.dim() == 4 && dw.sizes()[0] == M && dw.sizes()[1] == 1 && dw.sizes()[2] == 3 &&
                  dw.sizes()[3] == 3,
              "[", op, "] dw_weight must be [", M, ", 1, 3, 3], got ", dw.shape_string());
  for (int i : {int(kDbias), int(kDdwBias)})
    if (in[i].defined())
      LATHE_CHECK(in[i].dim() == 1 && in[i].sizes()[0] == M && in[i].dtype() == x.dtype(), "[", op,
                  "] ", i == kDbias ? "bias" : "dw_bias", " must be f32 [", M, "], got ",
                  in[i].shape_string());
  const int64_t s = a.get_int("dw_stride");
  LATHE_CHECK(s == 1 || s == 2, "[", op, "] dw_stride must be 1 or 2, got ", s);
  dw_post_ops(a);  // validates the activation names
  // The depthwise convolution's output, by conv2d's rule on the expanded tensor's sizes.
  Tensor mid = empty_strided(to_shape({z[0], M.expect_int(), z[2], z[3]}), to_shape({0, 0, 0, 0}),
                             x.dtype());  // sizes only
  const Attrs dw_attrs{{"stride", Shape{s, s}},
                       {"padding", Shape{1, 1}},
                       {"dilation", Shape{1, 1}},
                       {"groups", M.expect_int()}};
  std::vector<Tensor> conv_in{mid, dw, in[kDdwBias]};
  std::vector<TensorMeta> m = LATHE_OP("conv2d").shape(conv_in, dw_attrs);
  auto os = to_ints(m[0].sizes);
  Shape sizes = to_shape({os[0], os[1] / block, os[2], os[3], block});
  m[0].strides = contiguous_strides(sizes);
  m[0].sizes = std::move(sizes);
  m[0].device = x.device();
  return m;
}

void conv2d_1x1_dw_blocked_out_kernel(TensorList in, const Attrs& a, const std::vector<TensorMeta>&,
                                      TensorList outs) {
  detail::conv2d_1x1_dw_forward_blocked(in[kDx].contiguous(), in[kDweight], in[kDbias],
                                        in[kDdwWeight], in[kDdwBias], a.get_int("dw_stride"),
                                        dw_post_ops(a), outs[0]);
}

// ---- pointwise_fused(inputs...): a chain of f32 pointwise ops as one program (the cpu
// backend's fuse_pointwise). Attributes: "program" (kernels::PointwiseProgram's text form) and,
// when the chain's result had a known layout, its "strides" ----

struct PointwiseFusedAttrs final : ParsedAttrs {
  kernels::PointwiseProgram program;
};

std::shared_ptr<const ParsedAttrs> parse_pointwise_fused(const Attrs& a) {
  auto p = std::make_shared<PointwiseFusedAttrs>();
  p->program = kernels::PointwiseProgram::parse(a.get_string("program"));
  return p;
}

std::vector<TensorMeta> pointwise_fused_rule(TensorList in, const Attrs& a) {
  LATHE_CHECK(!in.empty(), "[pointwise_fused] takes at least one input");
  Shape sizes = in[0].sizes();
  for (size_t i = 0; i < in.size(); ++i) {
    LATHE_CHECK(in[i].defined() && in[i].dtype() == DType::f32, "[pointwise_fused] input ", i,
                " must be a defined f32 tensor, got ",
                in[i].defined() ? in[i].shape_string() : "undefined");
    sizes = broadcast_shapes(sizes, in[i].sizes(), "pointwise_fused");
  }
  const auto* parsed = a.parsed<PointwiseFusedAttrs>();
  const int reads = parsed ? parsed->program.num_inputs
                           : kernels::PointwiseProgram::parse(a.get_string("program"),
                                                              static_cast<int>(in.size()))
                                 .num_inputs;
  LATHE_CHECK(reads <= static_cast<int>(in.size()), "[pointwise_fused] the program reads ", reads,
              " inputs, the node has ", in.size());
  // The device of the inputs with dims (a 0-d CPU tensor may join device tensors, as in add).
  Device device = in[0].device();
  for (const Tensor& t : in)
    if (t.dim() > 0) {
      device = t.device();
      break;
    }
  for (const Tensor& t : in)
    LATHE_CHECK(t.device() == device || t.dim() == 0,
                "[pointwise_fused] inputs are on different devices: ", device, " and ", t.device());
  TensorMeta m = result_meta(sizes, DType::f32, device);
  if (a.has("strides")) {
    m.strides = a.get_shape("strides");
    LATHE_CHECK(m.strides.size() == sizes.size(), "[pointwise_fused] strides ", m.strides,
                " do not fit the result's sizes ", sizes);
  }
  return {m};
}

void pointwise_fused_out_kernel(TensorList in, const Attrs& a, const std::vector<TensorMeta>&,
                                TensorList outs) {
  if (const auto* p = a.parsed<PointwiseFusedAttrs>()) {
    kernels::run_pointwise(p->program, in, outs[0]);
    return;
  }
  kernels::run_pointwise(
      kernels::PointwiseProgram::parse(a.get_string("program"), static_cast<int>(in.size())), in,
      outs[0]);
}

std::vector<Tensor> pointwise_fused_kernel(TensorList in, const Attrs& a,
                                           const std::vector<TensorMeta>& m) {
  // Without recorded strides the result takes its inputs' layout, as each op of the chain did.
  Tensor out = m[0].strides.empty() ? alloc_output(m[0].sizes, m[0].dtype, in)
                                    : empty_strided(m[0].sizes, m[0].strides, m[0].dtype);
  pointwise_fused_out_kernel(in, a, m, {&out, 1});
  return {out};
}

// max_pool2d_blocked(x): max_pool2d on a blocked value (the output has the input's block), so a
// pooling between two blocked convolutions needs no reorders around it.
std::vector<TensorMeta> max_pool2d_blocked_rule(TensorList in, const Attrs& a) {
  const int64_t block = check_blocked(in[0], "max_pool2d_blocked", "x");
  auto z = in[0].shape();
  Tensor x4 = empty_strided(to_shape({z[0], z[1] * block, z[2], z[3]}), to_shape({0, 0, 0, 0}),
                            in[0].dtype());  // sizes only, for max_pool2d's rule
  std::vector<TensorMeta> m = LATHE_OP("max_pool2d").shape(std::vector<Tensor>{x4}, a);
  auto os = to_ints(m[0].sizes);
  Shape sizes = to_shape({os[0], os[1] / block, os[2], os[3], block});
  m[0].strides = contiguous_strides(sizes);
  m[0].sizes = std::move(sizes);
  m[0].device = in[0].device();
  return m;
}

void max_pool2d_blocked_out_kernel(TensorList in, const Attrs& a, const std::vector<TensorMeta>&,
                                   TensorList outs) {
  detail::max_pool2d_forward_blocked(in[0].contiguous(),
                                     detail::pool2d_params(a, "max_pool2d_blocked", true), outs[0]);
}

}  // namespace

namespace detail {
void register_fused_ops(OpRegistry& r) {
  using T = AttrType;
  OpDef linear = define_op("linear_fused", kLinearInputs, linear_fused_rule,
                           allocating(linear_fused_out_kernel), OpCategory::fused,
                           {required("act", T::string), optional("precision", T::string)});
  linear.parse_attrs = [](const Attrs& a) -> std::shared_ptr<const ParsedAttrs> {
    auto parsed = std::make_shared<LinearFusedAttrs>();
    parsed->act = parse_act(a, "act", "linear_fused");
    parsed->bf16 = detail::precision_bf16(a, "linear_fused");
    return parsed;
  };
  r.add(std::move(linear), linear_fused_out_kernel);
  {
    OpDef to = define_op("to_blocked", 1, to_blocked_rule, allocating(to_blocked_out_kernel),
                         OpCategory::copy, {required("block", T::integer)});
    r.add(std::move(to), to_blocked_out_kernel);
    OpDef from = define_op("from_blocked", 1, from_blocked_rule,
                           allocating(from_blocked_out_kernel), OpCategory::copy, {});
    r.add(std::move(from), from_blocked_out_kernel);
  }
  {
    std::vector<AttrSpec> attrs = conv2d_attrs();
    attrs.insert(attrs.end(), {required("act", T::string), required("act_min", T::real),
                               required("act_max", T::real), required("act2", T::string),
                               required("act2_min", T::real), required("act2_max", T::real),
                               optional("algorithm", T::string), optional("block", T::integer)});
    OpDef blocked =
        define_op("conv2d_blocked", kBlockedInputs, conv2d_blocked_rule,
                  allocating(conv2d_blocked_out_kernel), OpCategory::fused, std::move(attrs));
    r.add(std::move(blocked), conv2d_blocked_out_kernel);
  }
  {
    OpDef dw = define_op(
        "conv2d_1x1_dw_blocked", kDwInputs, conv2d_1x1_dw_blocked_rule,
        allocating(conv2d_1x1_dw_blocked_out_kernel), OpCategory::fused,
        {required("act", T::string), required("act_min", T::real), required("act_max", T::real),
         required("dw_stride", T::integer), required("dw_act", T::string),
         required("dw_act_min", T::real), required("dw_act_max", T::real)});
    r.add(std::move(dw), conv2d_1x1_dw_blocked_out_kernel);
  }
  {
    OpDef pw = define_op("pointwise_fused", -1, pointwise_fused_rule, pointwise_fused_kernel,
                         OpCategory::fused,
                         {required("program", T::string), optional("strides", T::int_list)});
    pw.parse_attrs = parse_pointwise_fused;
    r.add(std::move(pw), pointwise_fused_out_kernel);
  }
  {
    OpDef pool = define_op("max_pool2d_blocked", 1, max_pool2d_blocked_rule,
                           allocating(max_pool2d_blocked_out_kernel), OpCategory::pooling,
                           {required("kernel", T::int_list), required("stride", T::int_list),
                            required("padding", T::int_list), required("dilation", T::int_list),
                            required("ceil_mode", T::boolean)});
    r.add(std::move(pool), max_pool2d_blocked_out_kernel);
  }
  std::vector<AttrSpec> conv_attrs = conv2d_attrs();
  conv_attrs.insert(conv_attrs.end(), {optional("eps", T::real), required("act", T::string),
                                       required("act_min", T::real), required("act_max", T::real),
                                       required("act2", T::string), required("act2_min", T::real),
                                       required("act2_max", T::real)});
  OpDef conv =
      define_op("conv2d_fused", kNumInputs, conv2d_fused_rule, allocating(conv2d_fused_out_kernel),
                OpCategory::fused, std::move(conv_attrs));
  conv.parse_attrs = parse_conv2d_fused_attrs;
  r.add(std::move(conv), conv2d_fused_out_kernel);
}
}  // namespace detail

}  // namespace lathe
