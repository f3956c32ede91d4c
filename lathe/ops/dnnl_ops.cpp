// The oneDNN-backed ops: conv2d, linear, matmul, max_pool2d, avg_pool2d, adaptive_avg_pool2d.
// Shape rules validate everything (ranks, dtypes, channels and groups, broadcasting, window
// sizes) with messages naming the op and the shapes; kernels live in lathe/kernels/dnnl_*.
#include <array>

#include "lathe/kernels/dnnl_common.h"
#include "lathe/kernels/dnnl_conv.h"
#include "lathe/kernels/dnnl_matmul.h"
#include "lathe/kernels/dnnl_pool.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"

namespace lathe {
namespace {

using detail::str;

// A [h, w] pair from an attribute of 1 or 2 values (PyTorch accepts an int for both dims).
std::array<int64_t, 2> pair_attr(const Attrs& a, const char* name, const char* op) {
  auto v = a.get_ints(name);
  LATHE_CHECK(v.size() == 1 || v.size() == 2, "[", op, "] ", name, " must have 1 or 2 values, got ",
              v);
  return {v[0], v.size() == 2 ? v[1] : v[0]};
}

void check_floating(const Tensor& t, const char* op, const char* role) {
  LATHE_CHECK(is_floating(t.dtype()), "[", op, "] ", role, " dtype ", dtype_name(t.dtype()),
              " is not supported (needs f32 or f64): ", role, " ", t.shape_string());
}

void check_same_dtype(const Tensor& a, const char* ra, const Tensor& b, const char* rb,
                      const char* op) {
  LATHE_CHECK(a.dtype() == b.dtype(), "[", op, "] ", ra, " and ", rb, " dtypes differ: ", ra, " ",
              a.shape_string(), ", ", rb, " ", b.shape_string());
}

TensorMeta meta(const Shape& sizes, const Shape& strides, const Tensor& like) {
  TensorMeta m;
  m.sizes = sizes;
  m.strides = strides;
  m.dtype = like.dtype();
  m.device = like.device();
  return m;
}

// Channels-last strides for a 3-d (C,H,W) or 4-d (N,C,H,W) shape.
Shape channels_last_strides_any(const Shape& sizes) {
  if (sizes.size() == 4) return channels_last_strides(sizes);
  Shape four{1, sizes[0], sizes[1], sizes[2]};
  Shape st = channels_last_strides(four);
  return {st[1], st[2], st[3]};
}

// A 4-d view of a 3-d (unbatched) tensor; 4-d tensors as they are.
Tensor as_batched(const Tensor& t) {
  if (t.dim() == 4) return t;
  Shape sz = t.sizes(), st = t.strides();
  SymInt outer = sz[0] * st[0];
  sz.insert(sz.begin(), 1);
  st.insert(st.begin(), outer);
  return make_view(t, sz, st, t.storage_offset());
}

bool is_channels_last_any(const Tensor& x) {
  return (x.dim() == 3 || x.dim() == 4) && as_batched(x).is_channels_last();
}

Tensor alloc(const TensorMeta& m) { return empty_strided(m.sizes, m.strides, m.dtype); }

// An op whose kernel writes into the output the shape rule describes (metas carry strides):
// the allocating kernel allocates it and calls the out kernel.
// The out kernel itself goes to OpRegistry::add with the op.
OpDef define_out_op(const char* name, int num_inputs, ShapeRule shape, OutKernel out,
                    OpCategory category, std::vector<AttrSpec> attrs) {
  EagerKernel kernel = [out](TensorList in, const Attrs& a, const std::vector<TensorMeta>& m) {
    std::vector<Tensor> outs{alloc(m[0])};
    out(in, a, m, outs);
    return outs;
  };
  OpDef op = detail::define_op(name, num_inputs, std::move(shape), std::move(kernel), category,
                               std::move(attrs));
  return op;
}

// ---- conv2d ----

std::vector<TensorMeta> conv2d_rule(TensorList in, const Attrs& a) {
  const Tensor& x = in[0];
  const Tensor& w = in[1];
  const Tensor& b = in[2];
  LATHE_CHECK(x.defined() && w.defined(), "[conv2d] input and weight must be defined");
  LATHE_CHECK(x.dim() == 3 || x.dim() == 4,
              "[conv2d] expects a 3-d (C,H,W) or 4-d (N,C,H,W) input, got ", x.shape_string());
  LATHE_CHECK(w.dim() == 4,
              "[conv2d] expects a 4-d weight [out_channels, in_channels/groups, kH, kW], got ",
              w.shape_string());
  check_floating(x, "conv2d", "input");
  check_same_dtype(x, "input", w, "weight", "conv2d");
  detail::Conv2dParams p = detail::conv_params(a);
  LATHE_CHECK(p.groups > 0, "[conv2d] groups must be positive, got ", p.groups);
  for (int i = 0; i < 2; ++i) {
    LATHE_CHECK(p.stride[i] > 0, "[conv2d] stride must be positive, got ", a.get_ints("stride"));
    LATHE_CHECK(p.dilation[i] > 0, "[conv2d] dilation must be positive, got ",
                a.get_ints("dilation"));
    LATHE_CHECK(p.padding[i] >= 0, "[conv2d] padding must be non-negative, got ",
                a.get_ints("padding"));
  }
  const int64_t off = x.dim() - 3;  // index of the channel dim
  const SymInt C = x.sizes()[off], O = w.sizes()[0], Cg = w.sizes()[1];
  LATHE_CHECK(O.expect_int() % p.groups == 0, "[conv2d] out_channels ", O,
              " is not divisible by groups ", p.groups, ": input ", x.shape_string(), ", weight ",
              w.shape_string());
  LATHE_CHECK(C.expect_int() % p.groups == 0, "[conv2d] input channels ", C,
              " are not divisible by groups ", p.groups, ": input ", x.shape_string(), ", weight ",
              w.shape_string());
  LATHE_CHECK(C == Cg * p.groups, "[conv2d] input has ", C, " channels, weight expects ",
              Cg * p.groups, " (in_channels/groups ", Cg, " x groups ", p.groups, "): input ",
              x.shape_string(), ", weight ", w.shape_string());
  if (b.defined()) {
    LATHE_CHECK(b.dim() == 1 && b.sizes()[0] == O, "[conv2d] bias must be 1-d with ", O,
                " elements (out_channels), got bias ", b.shape_string(), ": input ",
                x.shape_string(), ", weight ", w.shape_string());
    check_same_dtype(x, "input", b, "bias", "conv2d");
  }
  Shape out_sz;
  if (off == 1) out_sz.push_back(x.sizes()[0]);
  out_sz.push_back(O);
  for (int i = 0; i < 2; ++i) {
    SymInt in_i = x.sizes()[off + 1 + i];
    SymInt k = w.sizes()[2 + i];
    SymInt dk = (k - 1) * p.dilation[i] + 1;
    SymInt padded = in_i + 2 * p.padding[i];
    LATHE_CHECK(dk <= padded, "[conv2d] kernel ", w.sizes()[2], "x", w.sizes()[3], " (dilation ",
                a.get_ints("dilation"), ") is larger than the padded input ",
                x.sizes()[off + 1] + 2 * p.padding[0], "x", x.sizes()[off + 2] + 2 * p.padding[1],
                ": input ", x.shape_string(), ", weight ", w.shape_string(), ", padding ",
                a.get_ints("padding"));
    out_sz.push_back(floor_div(padded - dk, p.stride[i]) + 1);
  }
  return {meta(out_sz, channels_last_strides_any(out_sz), x)};
}

void conv2d_out_kernel(TensorList in, const Attrs& a, const std::vector<TensorMeta>&,
                       TensorList outs) {
  const Tensor& out = outs[0];
  detail::conv2d_forward(as_batched(in[0]), in[1], in[2], detail::conv_params(a), as_batched(out));
}

// ---- linear ----

std::vector<TensorMeta> linear_rule(TensorList in, const Attrs&) {
  const Tensor& x = in[0];
  const Tensor& w = in[1];
  const Tensor& b = in[2];
  LATHE_CHECK(x.defined() && w.defined(), "[linear] input and weight must be defined");
  LATHE_CHECK(x.dim() >= 1, "[linear] input must have at least 1 dim, got ", x.shape_string());
  LATHE_CHECK(w.dim() == 2, "[linear] weight must be 2-d [out_features, in_features], got ",
              w.shape_string());
  check_floating(x, "linear", "input");
  check_same_dtype(x, "input", w, "weight", "linear");
  LATHE_CHECK(x.sizes().back() == w.sizes()[1], "[linear] input has ", x.sizes().back(),
              " features, weight expects ", w.sizes()[1], ": input ", x.shape_string(), ", weight ",
              w.shape_string());
  if (b.defined()) {
    LATHE_CHECK(b.dim() == 1 && b.sizes()[0] == w.sizes()[0], "[linear] bias must be 1-d with ",
                w.sizes()[0], " elements (out_features), got bias ", b.shape_string(), ": weight ",
                w.shape_string());
    check_same_dtype(x, "input", b, "bias", "linear");
  }
  Shape out_sz(x.sizes().begin(), x.sizes().end() - 1);
  out_sz.push_back(w.sizes()[0]);
  return {meta(out_sz, contiguous_strides(out_sz), x)};
}

// x viewed as [M, K] without a copy when its leading dims collapse; else a row-major copy.
Tensor as_matrix(const Tensor& x) {
  auto sz = x.shape();
  auto st = x.int_strides();
  const int64_t r = x.dim();
  const int64_t K = sz[r - 1];
  if (r == 1) return make_view(x, {1, K}, {K * st[0], st[0]}, x.storage_offset());
  int64_t M = 1, m_stride = 0;
  bool collapses = true;
  int64_t expect = -1;  // stride the next outer non-1 dim must have
  for (int64_t d = r - 2; d >= 0; --d) {
    M *= sz[d];
    if (sz[d] == 1) continue;
    if (expect < 0) {
      m_stride = st[d];
    } else if (st[d] != expect) {
      collapses = false;
    }
    expect = st[d] * sz[d];
  }
  if (expect < 0) m_stride = K * st[r - 1];  // all leading dims are 1
  if (collapses) return make_view(x, {M, K}, {m_stride, st[r - 1]}, x.storage_offset());
  Tensor c = detail::to_contiguous(x);
  return make_view(c, {M, K}, {K, 1}, c.storage_offset());
}

void linear_out_kernel(TensorList in, const Attrs& a, const std::vector<TensorMeta>&,
                       TensorList outs) {
  const Tensor& out = outs[0];
  Tensor x2 = as_matrix(in[0]);
  const int64_t N = in[1].shape()[0];
  Tensor o2 = make_view(out, {x2.shape()[0], N}, {N, 1}, out.storage_offset());
  detail::linear_forward(x2, in[1], in[2], o2, {}, detail::precision_bf16(a, "linear"));
}

// ---- matmul ----

// The broadcast batch dims of a and b (as torch.matmul), or throws.
Shape matmul_batch(const Tensor& a, const Tensor& b) {
  Shape ba(a.sizes().begin(), a.sizes().end() - std::min<int64_t>(a.dim(), 2));
  Shape bb(b.sizes().begin(), b.sizes().end() - std::min<int64_t>(b.dim(), 2));
  if (a.dim() < 2) ba.clear();
  if (b.dim() < 2) bb.clear();
  size_t n = std::max(ba.size(), bb.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    SymInt x = i < n - ba.size() ? SymInt(1) : ba[i - (n - ba.size())];
    SymInt y = i < n - bb.size() ? SymInt(1) : bb[i - (n - bb.size())];
    LATHE_CHECK(x == y || x == 1 || y == 1, "[matmul] batch dims ", ba, " and ", bb,
                " do not broadcast: a ", a.shape_string(), ", b ", b.shape_string());
    out[i] = x == 1 ? y : x;
  }
  return out;
}

std::vector<TensorMeta> matmul_rule(TensorList in, const Attrs&) {
  const Tensor& a = in[0];
  const Tensor& b = in[1];
  LATHE_CHECK(a.defined() && b.defined(), "[matmul] both operands must be defined");
  LATHE_CHECK(a.dim() >= 1 && b.dim() >= 1, "[matmul] both operands need at least 1 dim, got a ",
              a.shape_string(), " and b ", b.shape_string());
  check_floating(a, "matmul", "a");
  check_same_dtype(a, "a", b, "b", "matmul");
  SymInt ka = a.sizes().back();
  SymInt kb = b.dim() == 1 ? b.sizes()[0] : b.sizes()[b.dim() - 2];
  LATHE_CHECK(ka == kb, "[matmul] inner dims do not match: a ", a.shape_string(), " has ", ka,
              " columns, b ", b.shape_string(), " has ", kb, " rows");
  Shape out = matmul_batch(a, b);
  if (a.dim() >= 2) out.push_back(a.sizes()[a.dim() - 2]);
  if (b.dim() >= 2) out.push_back(b.sizes().back());
  return {meta(out, contiguous_strides(out), a)};
}

// t as a matrix operand of rank `rank` (1-d a becomes [1,K], 1-d b becomes [K,1], leading
// size-1 batch dims are added).
Tensor as_operand(const Tensor& t, bool is_a, int64_t rank) {
  Shape sz = t.sizes(), st = t.strides();
  if (t.dim() == 1) {
    if (is_a) {
      sz.insert(sz.begin(), 1);
      st.insert(st.begin(), sz[1] * st[0]);
    } else {
      sz.push_back(1);
      st.push_back(1);
    }
  }
  while (static_cast<int64_t>(sz.size()) < rank) {
    sz.insert(sz.begin(), 1);
    st.insert(st.begin(), 0);
  }
  return make_view(t, sz, st, t.storage_offset());
}

void matmul_out_kernel(TensorList in, const Attrs&, const std::vector<TensorMeta>&,
                       TensorList outs) {
  const Tensor& a = in[0];
  const Tensor& b = in[1];
  const Tensor& out = outs[0];
  Shape full = matmul_batch(a, b);
  full.push_back(a.dim() >= 2 ? a.sizes()[a.dim() - 2] : SymInt(1));
  full.push_back(b.dim() >= 2 ? b.sizes().back() : SymInt(1));
  const int64_t rank = static_cast<int64_t>(full.size());
  Tensor out_full = make_view(out, full, contiguous_strides(full), out.storage_offset());
  detail::matmul_forward(as_operand(a, true, rank), as_operand(b, false, rank), out_full);
}

// ---- pooling ----

struct Pool2dAttrs final : ParsedAttrs {
  detail::Pool2dParams params;
};

detail::Pool2dParams pool_params(const Attrs& a, const char* op, bool has_dilation) {
  if (const auto* parsed = a.parsed<Pool2dAttrs>()) return parsed->params;
  detail::Pool2dParams p;
  auto k = pair_attr(a, "kernel", op);
  auto s = a.get_ints("stride").empty() ? k : pair_attr(a, "stride", op);
  auto pad = pair_attr(a, "padding", op);
  std::array<int64_t, 2> d{1, 1};
  if (has_dilation) d = pair_attr(a, "dilation", op);
  for (int i = 0; i < 2; ++i) {
    p.kernel[i] = k[i];
    p.stride[i] = s[i];
    p.padding[i] = pad[i];
    p.dilation[i] = d[i];
  }
  p.ceil_mode = a.get_bool("ceil_mode");
  if (a.has("count_include_pad")) p.count_include_pad = a.get_bool("count_include_pad");
  return p;
}

std::shared_ptr<const ParsedAttrs> parse_pool_attrs(const Attrs& a, const char* op,
                                                    bool has_dilation) {
  auto parsed = std::make_shared<Pool2dAttrs>();
  parsed->params = pool_params(a, op, has_dilation);
  return parsed;
}

// PyTorch's pooling output size: with ceil_mode the last window must start inside the input
// or the left padding.
SymInt pool_out_size(SymInt in, int64_t k, int64_t s, int64_t pad, int64_t d, bool ceil_mode) {
  SymInt num = in + 2 * pad - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  SymInt out = floor_div(num, s) + 1;
  if (ceil_mode && (out - 1) * s >= in + pad) out = out - 1;
  return out;
}

// Pool outputs keep the input's layout: channels-last stays channels-last.
Shape pool_out_strides(const Tensor& x, const Shape& out_sz) {
  if (!x.is_contiguous() && is_channels_last_any(x)) return channels_last_strides_any(out_sz);
  return contiguous_strides(out_sz);
}

std::vector<TensorMeta> pool_rule(const Tensor& x, const detail::Pool2dParams& p, const char* op,
                                  bool is_max) {
  LATHE_CHECK(x.defined(), "[", op, "] input must be defined");
  LATHE_CHECK(x.dim() == 3 || x.dim() == 4, "[", op,
              "] expects a 3-d (C,H,W) or 4-d (N,C,H,W) input, got ", x.shape_string());
  check_floating(x, op, "input");
  const int64_t off = x.dim() - 3;
  Shape out_sz(x.sizes().begin(), x.sizes().begin() + off + 1);
  for (int i = 0; i < 2; ++i) {
    LATHE_CHECK(p.kernel[i] > 0, "[", op, "] kernel size must be positive, got ",
                std::vector<int64_t>{p.kernel[0], p.kernel[1]});
    LATHE_CHECK(p.stride[i] > 0, "[", op, "] stride must be positive, got ",
                std::vector<int64_t>{p.stride[0], p.stride[1]});
    LATHE_CHECK(p.dilation[i] > 0, "[", op, "] dilation must be positive, got ",
                std::vector<int64_t>{p.dilation[0], p.dilation[1]});
    LATHE_CHECK(p.padding[i] >= 0, "[", op, "] padding must be non-negative, got ",
                std::vector<int64_t>{p.padding[0], p.padding[1]});
    int64_t dk = p.dilation[i] * (p.kernel[i] - 1) + 1;
    LATHE_CHECK(p.padding[i] <= (is_max ? dk : p.kernel[i]) / 2, "[", op, "] padding ",
                std::vector<int64_t>{p.padding[0], p.padding[1]}, " must be at most half of the ",
                is_max ? "(dilated) " : "", "kernel size ",
                std::vector<int64_t>{p.kernel[0], p.kernel[1]});
    SymInt o = pool_out_size(x.sizes()[off + 1 + i], p.kernel[i], p.stride[i], p.padding[i],
                             p.dilation[i], p.ceil_mode);
    LATHE_CHECK(o >= 1, "[", op, "] output size is too small: input ", x.shape_string(),
                " with kernel ", std::vector<int64_t>{p.kernel[0], p.kernel[1]}, ", stride ",
                std::vector<int64_t>{p.stride[0], p.stride[1]}, ", padding ",
                std::vector<int64_t>{p.padding[0], p.padding[1]}, " gives no windows");
    out_sz.push_back(o);
  }
  return {meta(out_sz, pool_out_strides(x, out_sz), x)};
}

std::vector<TensorMeta> max_pool2d_rule(TensorList in, const Attrs& a) {
  return pool_rule(in[0], pool_params(a, "max_pool2d", true), "max_pool2d", true);
}

std::vector<TensorMeta> avg_pool2d_rule(TensorList in, const Attrs& a) {
  return pool_rule(in[0], pool_params(a, "avg_pool2d", false), "avg_pool2d", false);
}

void max_pool2d_out_kernel(TensorList in, const Attrs& a, const std::vector<TensorMeta>&,
                           TensorList outs) {
  const Tensor& out = outs[0];
  detail::max_pool2d_forward(as_batched(in[0]), pool_params(a, "max_pool2d", true),
                             as_batched(out));
}

void avg_pool2d_out_kernel(TensorList in, const Attrs& a, const std::vector<TensorMeta>&,
                           TensorList outs) {
  const Tensor& out = outs[0];
  detail::avg_pool2d_forward(as_batched(in[0]), pool_params(a, "avg_pool2d", false),
                             as_batched(out));
}

std::vector<TensorMeta> adaptive_avg_pool2d_rule(TensorList in, const Attrs& a) {
  const Tensor& x = in[0];
  const char* op = "adaptive_avg_pool2d";
  LATHE_CHECK(x.defined(), "[", op, "] input must be defined");
  LATHE_CHECK(x.dim() == 3 || x.dim() == 4, "[", op,
              "] expects a 3-d (C,H,W) or 4-d (N,C,H,W) input, got ", x.shape_string());
  check_floating(x, op, "input");
  auto os = pair_attr(a, "output_size", op);
  LATHE_CHECK(os[0] > 0 && os[1] > 0, "[", op, "] output_size must be positive, got ",
              a.get_ints("output_size"));
  const int64_t off = x.dim() - 3;
  LATHE_CHECK(x.sizes()[off + 1] > 0 && x.sizes()[off + 2] > 0, "[", op,
              "] input has an empty spatial dim: ", x.shape_string());
  Shape out_sz(x.sizes().begin(), x.sizes().begin() + off + 1);
  out_sz.push_back(os[0]);
  out_sz.push_back(os[1]);
  return {meta(out_sz, pool_out_strides(x, out_sz), x)};
}

void adaptive_avg_pool2d_out_kernel(TensorList in, const Attrs&, const std::vector<TensorMeta>&,
                                    TensorList outs) {
  const Tensor& out = outs[0];
  detail::adaptive_avg_pool2d_forward(as_batched(in[0]), as_batched(out));
}

Shape ints(const std::vector<int64_t>& v) { return to_shape(v); }

}  // namespace

namespace detail {
Conv2dParams conv_params(const Attrs& a) {
  if (const auto* parsed = a.parsed<Conv2dAttrs>()) return parsed->params;
  Conv2dParams p;
  auto s = pair_attr(a, "stride", "conv2d");
  auto pad = pair_attr(a, "padding", "conv2d");
  auto d = pair_attr(a, "dilation", "conv2d");
  for (int i = 0; i < 2; ++i) {
    p.stride[i] = s[i];
    p.padding[i] = pad[i];
    p.dilation[i] = d[i];
  }
  p.groups = a.get_int("groups");
  p.bf16 = precision_bf16(a, "conv2d");
  return p;
}

bool precision_bf16(const Attrs& a, const char* op) {
  if (!a.has("precision")) return false;
  const std::string& s = a.get_string("precision");
  LATHE_CHECK(s == "f32" || s == "bf16", "[", op, "] precision must be \"f32\" or \"bf16\", got \"",
              s, "\"");
  return s == "bf16";
}

std::shared_ptr<const ParsedAttrs> parse_conv2d_attrs(const Attrs& a) {
  auto parsed = std::make_shared<Conv2dAttrs>();
  parsed->params = conv_params(a);
  return parsed;
}

Pool2dParams pool2d_params(const Attrs& a, const char* op, bool has_dilation) {
  return pool_params(a, op, has_dilation);
}

std::vector<AttrSpec> conv2d_attrs() {
  return {required("stride", AttrType::int_list), required("padding", AttrType::int_list),
          required("dilation", AttrType::int_list), required("groups", AttrType::integer),
          optional("precision", AttrType::string)};
}

// A contraction whose operands are all bf16 runs in oneDNN's bf16 kernels (f32 accumulation)
// where the CPU has them.
static bool all_bf16_on_dnnl(TensorList in) {
  if (!dnnl_bf16_native()) return false;
  for (const Tensor& t : in)
    if (t.defined() && t.dtype() != DType::bf16) return false;
  return true;
}

void register_dnnl_ops(OpRegistry& r) {
  using T = AttrType;
  using C = OpCategory;
  OpDef conv2d =
      define_out_op("conv2d", 3, conv2d_rule, conv2d_out_kernel, C::contraction, conv2d_attrs());
  conv2d.parse_attrs = parse_conv2d_attrs;
  conv2d.native_low_precision_for = all_bf16_on_dnnl;
  r.add(std::move(conv2d), conv2d_out_kernel);
  OpDef linear = define_out_op("linear", 3, linear_rule, linear_out_kernel, C::contraction,
                               {optional("precision", T::string)});
  linear.native_low_precision_for = all_bf16_on_dnnl;
  r.add(std::move(linear), linear_out_kernel);
  OpDef matmul = define_out_op("matmul", 2, matmul_rule, matmul_out_kernel, C::contraction, {});
  matmul.native_low_precision_for = all_bf16_on_dnnl;
  r.add(std::move(matmul), matmul_out_kernel);
  OpDef max_pool =
      define_out_op("max_pool2d", 1, max_pool2d_rule, max_pool2d_out_kernel, C::pooling,
                    {required("kernel", T::int_list), required("stride", T::int_list),
                     required("padding", T::int_list), required("dilation", T::int_list),
                     required("ceil_mode", T::boolean)});
  max_pool.parse_attrs = [](const Attrs& a) { return parse_pool_attrs(a, "max_pool2d", true); };
  r.add(std::move(max_pool), max_pool2d_out_kernel);
  OpDef avg_pool =
      define_out_op("avg_pool2d", 1, avg_pool2d_rule, avg_pool2d_out_kernel, C::pooling,
                    {required("kernel", T::int_list), required("stride", T::int_list),
                     required("padding", T::int_list), required("ceil_mode", T::boolean),
                     required("count_include_pad", T::boolean)});
  avg_pool.parse_attrs = [](const Attrs& a) { return parse_pool_attrs(a, "avg_pool2d", false); };
  r.add(std::move(avg_pool), avg_pool2d_out_kernel);
  r.add(define_out_op("adaptive_avg_pool2d", 1, adaptive_avg_pool2d_rule,
                      adaptive_avg_pool2d_out_kernel, C::pooling,
                      {required("output_size", T::int_list)}),
        adaptive_avg_pool2d_out_kernel);
}
}  // namespace detail

namespace {
// An eager call of an op with a typed attribute parser: the attributes are parsed once here, and
// the shape rule and the kernel both read the parsed form (recording modes keep it too).
Tensor dispatch_parsed(const OpDef& op, TensorList in, Attrs attrs) {
  attach_parsed_attrs(op, attrs);
  return dispatch1(op, in, attrs);
}
}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              std::vector<int64_t> stride, std::vector<int64_t> padding,
              std::vector<int64_t> dilation, int64_t groups) {
  std::array<Tensor, 3> in{x, weight, bias};
  return dispatch_parsed(LATHE_OP("conv2d"), in,
                         Attrs{{"stride", ints(stride)},
                               {"padding", ints(padding)},
                               {"dilation", ints(dilation)},
                               {"groups", groups}});
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  std::array<Tensor, 3> in{x, weight, bias};
  return dispatch1(LATHE_OP("linear"), in, Attrs{});
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  std::array<Tensor, 2> in{a, b};
  return dispatch1(LATHE_OP("matmul"), in, Attrs{});
}

Tensor max_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                  std::vector<int64_t> padding, std::vector<int64_t> dilation, bool ceil_mode) {
  if (stride.empty()) stride = kernel;
  return dispatch_parsed(LATHE_OP("max_pool2d"), {&x, 1},
                         Attrs{{"kernel", ints(kernel)},
                               {"stride", ints(stride)},
                               {"padding", ints(padding)},
                               {"dilation", ints(dilation)},
                               {"ceil_mode", ceil_mode}});
}

Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                  std::vector<int64_t> padding, bool ceil_mode, bool count_include_pad) {
  if (stride.empty()) stride = kernel;
  return dispatch_parsed(LATHE_OP("avg_pool2d"), {&x, 1},
                         Attrs{{"kernel", ints(kernel)},
                               {"stride", ints(stride)},
                               {"padding", ints(padding)},
                               {"ceil_mode", ceil_mode},
                               {"count_include_pad", count_include_pad}});
}

Tensor adaptive_avg_pool2d(const Tensor& x, std::vector<int64_t> output_size) {
  return dispatch1(LATHE_OP("adaptive_avg_pool2d"), {&x, 1},
                   Attrs{{"output_size", ints(output_size)}});
}

}  // namespace lathe
