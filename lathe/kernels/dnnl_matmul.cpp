#include "lathe/kernels/dnnl_matmul.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "lathe/core/threads.h"
#include "lathe/kernels/dnnl_common.h"
#include "lathe/kernels/gemv.h"
#include "lathe/kernels/kernel_options.h"
#include "lathe/kernels/non_finite.h"

namespace lathe::detail {
namespace {

using dnnl::memory;

// A view of t with the batch dims of `out` (stride 0 where t broadcasts), keeping t's last two.
Tensor expand_batch(const Tensor& t, const Tensor& out) {
  auto sz = t.shape();
  auto st = t.int_strides();
  const int64_t r = t.dim();
  Shape nsz(r), nst(r);
  for (int64_t d = 0; d < r; ++d) {
    bool batch = d < r - 2;
    int64_t want = batch ? out.shape()[d] : sz[d];
    nsz[d] = want;
    nst[d] = (batch && sz[d] != want) ? 0 : st[d];
  }
  return make_view(t, nsz, nst, t.storage_offset());
}

// True when oneDNN's matmul kernels can read the last two dims in place: one of them must have
// unit stride (row-major or transposed).
bool gemm_readable(const Tensor& t) {
  auto sz = t.shape();
  auto st = t.int_strides();
  const int64_t r = t.dim();
  const int64_t rows = sz[r - 2], cols = sz[r - 1];
  // Size-1 dims get the strides dnnl_md normalises them to.
  const int64_t scol = cols == 1 ? 1 : st[r - 1];
  const int64_t srow = rows == 1 ? scol * cols : st[r - 2];
  return (scol == 1 && srow >= cols) || (srow == 1 && scol >= rows);
}

// The oneDNN view of a matmul operand: batch dims with stride 0 (broadcast) become size 1.
memory::desc operand_md(const Tensor& t) {
  auto sz = t.shape();
  auto st = t.int_strides();
  for (int64_t d = 0; d + 2 < t.dim(); ++d) {
    if (st[d] == 0) sz[d] = 1;
  }
  return dnnl_md(sz, st, t.dtype());
}

std::shared_ptr<DnnlPrimitive> make_matmul(const memory::desc& a, const memory::desc& b,
                                           const memory::desc& bias, const memory::desc& dst,
                                           const PostOps& post = {}) {
  try {
    dnnl::matmul::desc d(a, b, bias, dst);
    dnnl::matmul::primitive_desc pd(d, dnnl_post_ops_attr(post), dnnl_engine());
    auto r = std::make_shared<DnnlPrimitive>();
    r->pd = pd;
    r->prim = dnnl::matmul(pd);
    r->impl = pd.impl_info_str();
    return r;
  } catch (const dnnl::error&) {
    return nullptr;  // unsupported layout: the caller copies and retries
  }
}

bool is_reference_impl(const std::shared_ptr<const DnnlPrimitive>& p) {
  return !p || p->impl.find("ref") != std::string::npos;
}

// Runs a @ b -> out with oneDNN; returns false when only oneDNN's reference kernel (or none)
// accepts these layouts.
bool try_matmul(const Tensor& a, const Tensor& b, const Tensor& out, bool accept_reference) {
  memory::desc a_md, b_md, o_md;
  try {
    a_md = operand_md(a);
    b_md = operand_md(b);
    o_md = dnnl_md(out);
  } catch (const dnnl::error&) {
    return false;  // strides oneDNN cannot describe (e.g. a view of a view with steps): copy
  }
  DnnlKey key;
  key.add(2).add(a.shape()).add(a.int_strides()).add(b.shape()).add(b.int_strides());
  key.add(out.shape()).add(out.int_strides()).add(dnnl_prepare_threads());
  key.add(static_cast<int64_t>(a.dtype())).add(static_cast<int64_t>(out.dtype()));
  auto prim =
      dnnl_cached_primitive(key, [&] { return make_matmul(a_md, b_md, memory::desc(), o_md); });
  if (!prim || (!accept_reference && is_reference_impl(prim))) return false;
  DnnlArgs args(*prim);
  args.add(DNNL_ARG_SRC, a.raw_data(), [&] { return a_md; });
  args.add(DNNL_ARG_WEIGHTS, b.raw_data(), [&] { return b_md; });
  args.add(DNNL_ARG_DST, out.raw_data(), [&] { return o_md; });
  args.run();
  return true;
}

void matmul_dnnl(const Tensor& a_in, const Tensor& b_in, const Tensor& out) {
  Tensor a = expand_batch(a_in, out), b = expand_batch(b_in, out);
  if (gemm_readable(a) && gemm_readable(b) && try_matmul(a, b, out, false)) return;
  // Dense row-major operands with the batch flattened always run the optimized kernels.
  const int64_t r = out.dim();
  int64_t batch = 1;
  for (int64_t d = 0; d + 2 < r; ++d) batch *= out.shape()[d];
  auto flat = [&](const Tensor& t) {
    Tensor c = to_contiguous(t);
    Shape s{batch, t.shape()[r - 2], t.shape()[r - 1]};
    return make_view(c, s, contiguous_strides(s), c.storage_offset());
  };
  Tensor out_c = out.is_contiguous() ? out : empty(out.sizes(), out.dtype());
  Shape os{batch, out.shape()[r - 2], out.shape()[r - 1]};
  Tensor o3 = make_view(out_c, os, contiguous_strides(os), out_c.storage_offset());
  if (!try_matmul(flat(a), flat(b), o3, true)) {
    throw Error(str("[matmul] oneDNN rejected ", a.shape_string(), " @ ", b.shape_string()));
  }
  if (!out_c.is_same(out)) copy_into(out, out_c);
}

template <class T>
void matmul_direct(const Tensor& a_in, const Tensor& b_in, const Tensor& out) {
  Tensor a = expand_batch(a_in, out), b = expand_batch(b_in, out);
  const int64_t r = out.dim();
  auto os = out.shape(), ot = out.int_strides(), at = a.int_strides(), bt = b.int_strides();
  const int64_t M = os[r - 2], N = os[r - 1], K = a.shape()[r - 1];
  int64_t batch = 1;
  for (int64_t d = 0; d + 2 < r; ++d) batch *= os[d];
  const T* ap = static_cast<const T*>(a.raw_data());
  const T* bp = static_cast<const T*>(b.raw_data());
  T* op = static_cast<T*>(out.raw_data());
  const int nt = lathe::num_threads();
#pragma omp parallel for collapse(2) num_threads(nt)
  for (int64_t bi = 0; bi < batch; ++bi) {
    for (int64_t i = 0; i < M; ++i) {
      int64_t rem = bi, ao = 0, bo = 0, oo = 0;
      for (int64_t d = r - 3; d >= 0; --d) {
        int64_t idx = rem % os[d];
        rem /= os[d];
        ao += idx * at[d];
        bo += idx * bt[d];
        oo += idx * ot[d];
      }
      for (int64_t j = 0; j < N; ++j) {
        T acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += ap[ao + i * at[r - 2] + k * at[r - 1]] * bp[bo + k * bt[r - 2] + j * bt[r - 1]];
        op[oo + i * ot[r - 2] + j * ot[r - 1]] = acc;
      }
    }
  }
}

std::shared_ptr<DnnlPrimitive> make_linear(const memory::desc& x_md, int64_t K, int64_t N,
                                           const Tensor& bias, const memory::desc& dst,
                                           const PostOps& post) {
  memory::desc w_any({K, N}, x_md.data_type(), memory::format_tag::any);
  memory::desc bias_md = bias.defined() ? memory::desc({1, N}, dnnl_dtype(bias.dtype(), "linear"),
                                                       memory::format_tag::ab)
                                        : memory::desc();
  return make_matmul(x_md, w_any, bias_md, dst, post);
}

void linear_dnnl(const Tensor& x_in, const Tensor& w_in, const Tensor& bias_in, const Tensor& out,
                 const PostOps& post) {
  Tensor x = gemm_readable(x_in) ? x_in : to_contiguous(x_in);
  Tensor w = w_in.is_non_overlapping_and_dense() ? w_in : to_contiguous(w_in);
  Tensor bias = bias_in.defined() ? to_contiguous(bias_in) : bias_in;
  const int64_t K = x.shape()[1], N = w.shape()[0];
  DnnlKey key;
  key.add(3).add(x.shape()).add(x.int_strides()).add(N);
  key.add(bias.defined() ? 1 + static_cast<int64_t>(bias.dtype()) : 0);
  // The output's dtype too: a bf16-precision linear (bf16 x, f32 out) and a bf16 one (bf16 x and
  // out) are different primitives.
  key.add(out.int_strides()).add(static_cast<int64_t>(x.dtype()));
  key.add(static_cast<int64_t>(out.dtype()));
  dnnl_add_post_ops_key(key, post);
  key.add(dnnl_prepare_threads());
  auto prim = dnnl_cached_primitive(
      key, [&] { return make_linear(dnnl_md(x), K, N, bias, dnnl_md(out), post); });
  LATHE_CHECK(prim != nullptr, "[linear] oneDNN rejected x ", x.shape_string(), " weight ",
              w.shape_string());
  const dnnl::primitive_desc& pd = prim->pd;
  // W^T described by strides: no transpose copy (and none at all once reordered and cached).
  auto user_md = [&] {
    return dnnl_md({K, N}, {w.int_strides()[1], w.int_strides()[0]}, w.dtype());
  };
  DnnlWeight wmem = dnnl_cached_weight(w, user_md, pd.weights_desc());
  DnnlArgs args(*prim);
  args.add(DNNL_ARG_SRC, x.raw_data(), [&] { return pd.src_desc(); });
  args.add_memory(DNNL_ARG_WEIGHTS, wmem.mem);
  args.add(DNNL_ARG_DST, out.raw_data(), [&] { return pd.dst_desc(); });
  if (bias.defined()) args.add(DNNL_ARG_BIAS, bias.raw_data(), [&] { return pd.weights_desc(1); });
  args.run();
}

template <class T>
void linear_direct(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out) {
  const int64_t M = x.shape()[0], K = x.shape()[1], N = w.shape()[0];
  auto xt = x.int_strides(), wt = w.int_strides(), ot = out.int_strides();
  const T* xp = static_cast<const T*>(x.raw_data());
  const T* wp = static_cast<const T*>(w.raw_data());
  const T* bp = bias.defined() ? static_cast<const T*>(bias.raw_data()) : nullptr;
  const int64_t bst = bias.defined() ? bias.int_strides()[0] : 0;
  T* op = static_cast<T*>(out.raw_data());
  const int nt = lathe::num_threads();
#pragma omp parallel for collapse(2) num_threads(nt)
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      T acc = bp ? bp[j * bst] : T(0);
      for (int64_t k = 0; k < K; ++k) acc += xp[i * xt[0] + k * xt[1]] * wp[j * wt[0] + k * wt[1]];
      op[i * ot[0] + j * ot[1]] = acc;
    }
  }
}

// out = post(plain) elementwise ([M, N], any strides), where plain holds the plain linear.
template <class T>
void apply_linear_post_ops(const Tensor& plain, const PostOps& post, const Tensor& out) {
  const int64_t M = out.shape()[0], N = out.shape()[1];
  auto pt = plain.int_strides(), ot = out.int_strides();
  const T* pp = static_cast<const T*>(plain.raw_data());
  T* op = static_cast<T*>(out.raw_data());
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      T& o = op[i * ot[0] + j * ot[1]];
      T v = apply_post_act(pp[i * pt[0] + j * pt[1]], post.act, post.act_lo, post.act_hi);
      if (post.sum) v += o;
      o = apply_post_act(v, post.act2, post.act2_lo, post.act2_hi);
    }
}

}  // namespace

void matmul_forward(const Tensor& a, const Tensor& b, const Tensor& out) {
  if (out.numel() == 0) return;
  const bool bf16 = a.dtype() == DType::bf16 && b.dtype() == DType::bf16 &&
                    out.dtype() == DType::bf16 && dnnl_bf16_native();
  if ((a.dtype() == DType::f32 || bf16) && a.numel() > 0 && b.numel() > 0) {
    matmul_dnnl(a, b, out);
  } else {
    LATHE_DISPATCH_FLOATING(a.dtype(), "matmul", [&] { matmul_direct<scalar_t>(a, b, out); });
  }
}

void linear_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out,
                    const PostOps& post, bool bf16) {
  if (out.numel() == 0) return;
  if (bf16 && x.dtype() == DType::f32 && w.dtype() == DType::f32 && out.dtype() == DType::f32 &&
      dnnl_bf16_native() && x.numel() > 0 && w.numel() > 0) {
    if (needs_nan_safe_post_ops(post, x, w, bias)) {  // see non_finite.h
      Tensor plain = empty(out.sizes(), DType::f32);
      linear_forward(x, w, bias, plain, {}, true);
      apply_linear_post_ops<float>(plain, post, out);
      return;
    }
    linear_dnnl(dnnl_round_to_bf16(x), w, bias, out, post);
    return;
  }
  if (x.dtype() == DType::bf16 && w.dtype() == DType::bf16 && out.dtype() == DType::bf16 &&
      dnnl_bf16_native() && x.numel() > 0 && w.numel() > 0) {
    linear_dnnl(x, w, bias, out, post);
    return;
  }
  if (x.dtype() == DType::f32 && x.numel() > 0 && w.numel() > 0) {
    if (needs_nan_safe_post_ops(post, x, w, bias)) {  // see non_finite.h
      Tensor plain = empty(out.sizes(), DType::f32);
      linear_forward(x, w, bias, plain, {});
      apply_linear_post_ops<float>(plain, post, out);
      return;
    }
    if (kernel_gemv_enabled() && linear_gemv(x, w, bias, out, post)) return;
    linear_dnnl(x, w, bias, out, post);
    return;
  }
  LATHE_DISPATCH_FLOATING(x.dtype(), "linear", [&] {
    if (post.empty()) {
      linear_direct<scalar_t>(x, w, bias, out);
      return;
    }
    Tensor plain = empty(out.sizes(), out.dtype());
    linear_direct<scalar_t>(x, w, bias, plain);
    apply_linear_post_ops<scalar_t>(plain, post, out);
  });
}

}  // namespace lathe::detail
