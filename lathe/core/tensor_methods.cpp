// Tensor's op members: argument handling that needs only metadata happens here; the op itself is
// the function lathe_ops registered (tensor_methods.h).
#include "lathe/core/tensor_methods.h"

#include <algorithm>
#include <atomic>
#include <numeric>

#include "lathe/core/error.h"
#include "lathe/core/tensor.h"

namespace lathe {
namespace {

std::atomic<const detail::TensorOpFunctions*> registered{nullptr};

const detail::TensorOpFunctions& ops(const char* what) { return detail::tensor_op_functions(what); }

int64_t wrap(int64_t d, int64_t ndim, const char* op) {
  int64_t r = d < 0 ? d + ndim : d;
  LATHE_CHECK(r >= 0 && r < ndim, "[", op, "] dim ", d, " is out of range for a tensor of ", ndim,
              " dims");
  return r;
}

}  // namespace

void detail::register_tensor_op_functions(const TensorOpFunctions* fns) { registered.store(fns); }

const detail::TensorOpFunctions& detail::tensor_op_functions(const char* what) {
  const TensorOpFunctions* fns = registered.load(std::memory_order_acquire);
  LATHE_CHECK(fns != nullptr, "[", what,
              "] Tensor's op members are implemented by lathe_ops, which is not in this program: "
              "link lathe_ops (the Lathe::lathe target has it) and include lathe/lathe.h or "
              "lathe/ops/ops.h in one of its files");
  return *fns;
}

// ---- views ----

Tensor Tensor::view(const Shape& sizes) const { return ops("view").view(*this, sizes); }

Tensor Tensor::reshape(const Shape& sizes) const { return ops("reshape").reshape(*this, sizes); }

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  return ops("permute").permute(*this, dims);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  int64_t n = dim();
  if (n == 0) return *this;
  d0 = wrap(d0, n, "transpose");
  d1 = wrap(d1, n, "transpose");
  std::vector<int64_t> p(n);
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[d0], p[d1]);
  return permute(p);
}

Tensor Tensor::t() const {
  LATHE_CHECK(dim() <= 2, "[t] expects a tensor of at most 2 dims, got ", shape_string());
  return dim() < 2 ? *this : transpose(0, 1);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  return ops("slice").slice(*this, d, start, end, step);
}

Tensor Tensor::narrow(int64_t d, SymInt start, SymInt length) const {
  LATHE_CHECK(dim() > 0, "[narrow] cannot narrow a 0-d tensor");
  int64_t dd = wrap(d, dim(), "narrow");
  SymInt n = size(dd), s = start;
  if (s < 0) s = s + n;
  LATHE_CHECK(s >= 0 && length >= 0 && s + length <= n, "[narrow] start ", start, " + length ",
              length, " exceeds dim ", dd, " of size ", n, " in ", shape_string());
  return ops("narrow").slice(*this, dd, s, s + length, 1);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  return ops("select").select(*this, d, index);
}

Tensor Tensor::expand(const Shape& sizes) const { return ops("expand").expand(*this, sizes); }

Tensor Tensor::squeeze() const { return ops("squeeze").squeeze(*this, Shape{}); }

Tensor Tensor::squeeze(int64_t d) const { return ops("squeeze").squeeze(*this, Shape{d}); }

Tensor Tensor::unsqueeze(int64_t d) const { return ops("unsqueeze").unsqueeze(*this, d); }

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  int64_t n = dim();
  if (n == 0) return reshape({1});
  start = wrap(start, n, "flatten");
  end = wrap(end, n, "flatten");
  LATHE_CHECK(start <= end, "[flatten] start_dim ", start, " is after end_dim ", end);
  Shape sz;
  for (int64_t i = 0; i < start; ++i) sz.push_back(sizes()[i]);
  SymInt m = 1;
  for (int64_t i = start; i <= end; ++i) m = m * sizes()[i];
  sz.push_back(m);
  for (int64_t i = end + 1; i < n; ++i) sz.push_back(sizes()[i]);
  return reshape(sz);
}

Tensor Tensor::as_strided(const Shape& sizes, const Shape& strides, int64_t offset) const {
  return ops("as_strided").as_strided(*this, sizes, strides, offset);
}

// ---- copies ----

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return ops("contiguous").clone(*this, "contiguous", std::nullopt);
}

Tensor Tensor::to_channels_last() const {
  if (is_channels_last()) return *this;
  return ops("to_channels_last").clone(*this, "channels_last", std::nullopt);
}

Tensor Tensor::clone() const { return ops("clone").clone(*this, "contiguous", std::nullopt); }

Tensor Tensor::to(DType dt) const {
  if (dt == dtype()) return *this;
  return ops("to").clone(*this, "preserve", dt);
}

Tensor Tensor::to_owned(DType dt) const { return ops("to_owned").clone(*this, "contiguous", dt); }

Tensor& Tensor::copy_(const Tensor& src) {
  // copy_ is also the transfer between devices (as in PyTorch): src moves to this device first.
  ops("copy_").copy_(*this, src.defined() && src.device() != device() ? src.to(device()) : src);
  return *this;
}

Tensor& Tensor::fill_(double v) {
  ops("fill_").fill_(*this, v);
  return *this;
}

// ---- autograd ----

Tensor Tensor::grad() const { return ops("grad").grad(*this); }

void Tensor::set_grad(const Tensor& g) const { ops("set_grad").set_grad(*this, g); }

bool Tensor::is_leaf() const { return ops("is_leaf").is_leaf(*this); }

std::string Tensor::grad_fn_name() const { return ops("grad_fn").grad_fn_name(*this); }

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  ops("backward").backward(*this, gradient, retain_graph);
}

Tensor Tensor::detach() const { return ops("detach").detach(*this); }

}  // namespace lathe
