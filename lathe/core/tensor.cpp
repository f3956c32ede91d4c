#include "lathe/core/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <numeric>
#include <sstream>

#include "lathe/core/device_registry.h"
#include "lathe/core/dispatch_mode.h"

namespace lathe {

std::vector<int64_t> to_ints(const Shape& s) {
  std::vector<int64_t> r(s.size());
  for (size_t i = 0; i < s.size(); ++i) r[i] = s[i].expect_int();
  return r;
}

Shape to_shape(const std::vector<int64_t>& v) { return Shape(v.begin(), v.end()); }

SymInt shape_numel(const Shape& s) {
  SymInt n = 1;
  for (const SymInt& d : s) n *= d;
  return n;
}

static int64_t wrap_dim(int64_t d, int64_t ndim, const char* who) {
  int64_t r = d < 0 ? d + ndim : d;
  LATHE_CHECK(r >= 0 && r < ndim, "[", who, "] dim ", d, " is out of range for a tensor of ", ndim,
              " dims");
  return r;
}

SymInt Tensor::size(int64_t d) const { return impl_->sizes[wrap_dim(d, dim(), "size")]; }
SymInt Tensor::stride(int64_t d) const { return impl_->strides[wrap_dim(d, dim(), "stride")]; }

int64_t Tensor::numel() const { return shape_numel(impl_->sizes).expect_int(); }

bool Tensor::is_contiguous() const {
  // SymInt arithmetic, so fake tensors with symbolic sizes answer too (guarding if needed).
  SymInt expected = 1;
  for (int64_t i = dim() - 1; i >= 0; --i) {
    const SymInt& s = impl_->sizes[i];
    if (s == 1) continue;
    if (impl_->strides[i] != expected) return false;
    expected = expected * s;
  }
  return true;
}

bool Tensor::is_channels_last() const {
  if (dim() != 4) return false;
  const int order[4] = {1, 3, 2, 0};  // innermost first: C, W, H, N
  SymInt expected = 1;
  for (int i : order) {
    const SymInt& s = impl_->sizes[i];
    if (s == 1) continue;
    if (impl_->strides[i] != expected) return false;
    expected = expected * s;
  }
  return true;
}

bool Tensor::is_non_overlapping_and_dense() const {
  auto sz = shape();
  auto st = int_strides();
  std::vector<int> perm(sz.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::sort(perm.begin(), perm.end(), [&](int a, int b) { return st[a] < st[b]; });
  int64_t expected = 1;
  for (int i : perm) {
    if (sz[i] == 1) continue;
    if (st[i] != expected) return false;
    expected *= sz[i];
  }
  return true;
}

// Reading the values of a tensor while tracing: a mode holding pending work computes it (graph
// breaks); otherwise a fake tensor's read says what to do instead.
static void check_not_traced(const Tensor& t, const char* what) {
  if (!detail::is_tracing() || !t.defined()) return;
  if (current_dispatch_mode()->materialize(t, what)) return;
  if (!t.has_storage())
    throw DataReadWhileTracing(detail::str(
        "[trace] ", what, " reads the data of ", t.shape_string(),
        " while tracing, but traced tensors hold no data; return the tensor from the compiled "
        "function and read it outside, or keep data-dependent code out of the compiled function "
        "(lathe::compile splits the function at such reads unless CompileOptions::fullgraph is "
        "set)"));
}

void* Tensor::raw_data() const {
  check_not_traced(*this, "raw_data()");
  if (impl_ && !impl_->device.is_cpu())
    if (const detail::DeviceFunctions* fns = detail::find_device(impl_->device.kind());
        fns && fns->sync)
      fns->sync();
  LATHE_CHECK(impl_ && impl_->storage, "[data] tensor ", defined() ? shape_string() : "undefined",
              " has no data (it is fake or lives on the ", defined() ? "lazy" : "?",
              " device); call lathe::sync() or .to(Device::cpu()) first");
  return static_cast<char*>(impl_->storage->data()) +
         impl_->offset * static_cast<int64_t>(itemsize(impl_->dtype));
}

void Tensor::bump_version() const {
  if (impl_->storage) impl_->storage->bump_version();
}

namespace {
// Calls f(linear_offset_in_elements) for every element in row-major logical order.
template <class F>
void for_each_offset(const std::vector<int64_t>& sz, const std::vector<int64_t>& st, F&& f) {
  int64_t n = 1;
  for (int64_t s : sz) n *= s;
  if (n == 0) return;
  std::vector<int64_t> idx(sz.size(), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    f(off);
    for (int64_t d = static_cast<int64_t>(sz.size()) - 1; d >= 0; --d) {
      if (++idx[d] < sz[d]) {
        off += st[d];
        break;
      }
      off -= st[d] * (sz[d] - 1);
      idx[d] = 0;
    }
  }
}
}  // namespace

template <class T>
std::vector<T> Tensor::to_vector() const {
  check_not_traced(*this, "to_vector()");
  std::vector<T> out;
  out.reserve(numel());
  const char* base = static_cast<const char*>(raw_data());
  LATHE_DISPATCH_ALL_AND_HALF(dtype(), "to_vector", [&] {
    const scalar_t* p = reinterpret_cast<const scalar_t*>(base);
    for_each_offset(shape(), int_strides(),
                    [&](int64_t off) { out.push_back(static_cast<T>(p[off])); });
  });
  return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;

double Tensor::item() const {
  check_not_traced(*this, "item()");
  LATHE_CHECK(numel() == 1, "[item] tensor ", shape_string(), " has ", numel(),
              " elements; item() needs exactly one");
  return to_vector<double>()[0];
}

std::string Tensor::shape_string() const {
  if (!defined()) return "undefined";
  std::ostringstream os;
  os << dtype_name(dtype()) << '[';
  for (int64_t i = 0; i < dim(); ++i) os << (i ? "," : "") << impl_->sizes[i];
  os << ']';
  return os.str();
}

namespace {

constexpr int64_t kPrintEdge = 3;  // elements shown at each end of a long dim

// The indices shown along a dim of size n: all, or the first and last kPrintEdge with -1 (an
// ellipsis) between them.
std::vector<int64_t> shown_indices(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) {
    if (n > 2 * kPrintEdge && i == kPrintEdge) {
      out.push_back(-1);
      i = n - kPrintEdge;
    }
    out.push_back(i);
  }
  return out;
}

// Prints the element at an offset (in elements) from the tensor's data pointer.
void print_element(std::ostream& os, const Tensor& t, int64_t offset) {
  LATHE_DISPATCH_ALL_AND_HALF(t.dtype(), "to_string", [&] {
    scalar_t v = static_cast<const scalar_t*>(t.raw_data())[offset];
    if (t.dtype() == DType::b8)
      os << (v ? "true" : "false");
    else if (is_floating(t.dtype()))
      os << std::setprecision(6) << static_cast<double>(v);
    else
      os << static_cast<int64_t>(v);
  });
}

// Prints the values as nested brackets, one level per dim. A loop with an explicit position per
// dim rather than recursion, so a tensor of any rank prints without exhausting the stack.
void print_values(std::ostream& os, const Tensor& t) {
  const std::vector<int64_t> sz = t.shape(), st = t.int_strides();
  const size_t rank = sz.size();
  if (rank == 0) return print_element(os, t, 0);
  std::vector<std::vector<int64_t>> shown(rank);
  for (size_t d = 0; d < rank; ++d) shown[d] = shown_indices(sz[d]);
  std::vector<size_t> pos(rank, 0);          // position in shown[d] at each open dim
  std::vector<int64_t> offset(rank + 1, 0);  // element offset of the sub-tensor open at dim d
  size_t d = 0;
  os << '[';
  while (true) {
    if (pos[d] == shown[d].size()) {  // dim d is done: close it, continue its parent
      os << ']';
      if (d == 0) return;
      ++pos[--d];
      continue;
    }
    if (pos[d] > 0) {
      os << ',';
      if (d + 1 < rank)
        os << '\n' << std::string(d + 2, ' ');
      else
        os << ' ';
    }
    const int64_t i = shown[d][pos[d]];
    if (i < 0) {
      os << "...";
      ++pos[d];
    } else if (d + 1 == rank) {
      print_element(os, t, offset[d] + i * st[d]);
      ++pos[d];
    } else {
      offset[d + 1] = offset[d] + i * st[d];
      pos[++d] = 0;
      os << '[';
    }
  }
}

}  // namespace

std::string Tensor::to_string() const {
  if (!defined()) return "Tensor(undefined)";
  check_not_traced(*this, "printing a tensor's values");
  std::ostringstream os;
  os << "Tensor(" << shape_string();
  if (device() != Device::cpu() || !has_storage()) {
    os << ", device=" << device() << (has_storage() ? "" : ", no data") << ")";
    return os.str();
  }
  os << ",\n ";
  print_values(os, *this);
  os << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

Shape contiguous_strides(const Shape& sizes) {
  Shape st(sizes.size());
  SymInt acc = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    st[i] = acc;
    acc = acc * sym_max(sizes[i], 1);
  }
  return st;
}

Shape channels_last_strides(const Shape& sizes) {
  LATHE_CHECK(sizes.size() == 4, "[channels_last] needs a 4-d shape, got ", sizes.size(), " dims");
  Shape st(4);
  SymInt c = sym_max(sizes[1], 1), w = sym_max(sizes[3], 1), h = sym_max(sizes[2], 1);
  st[1] = 1;
  st[3] = c;
  st[2] = c * w;
  st[0] = c * w * h;
  return st;
}

static void check_sizes(const Shape& sizes, const char* who) {
  for (const SymInt& s : sizes) LATHE_CHECK(s >= 0, "[", who, "] negative size in shape ", sizes);
}

Tensor empty_strided(const Shape& sizes, const Shape& strides, DType dtype) {
  check_sizes(sizes, "empty");
  LATHE_CHECK(sizes.size() == strides.size(), "[empty_strided] ", sizes.size(), " sizes but ",
              strides.size(), " strides");
  auto impl = std::make_shared<TensorImpl>();
  int64_t span = 1;
  bool any_zero = false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) any_zero = true;
    span += (sizes[i].expect_int() - 1) * strides[i].expect_int();
  }
  if (any_zero) span = 0;
  impl->storage = Storage::allocate(static_cast<size_t>(span) * itemsize(dtype));
  impl->sizes = sizes;
  impl->strides = strides;
  impl->dtype = dtype;
  if (DispatchMode* mode = current_dispatch_mode()) mode->on_allocation(impl.get());
  return Tensor(std::move(impl));
}

Tensor empty(const Shape& sizes, DType dtype) {
  return empty_strided(sizes, contiguous_strides(sizes), dtype);
}

Tensor empty_like(const Tensor& like, DType dtype) {
  if (like.is_contiguous() || !like.is_non_overlapping_and_dense())
    return empty(like.sizes(), dtype);
  // Same dim order in memory as `like`.
  auto sz = like.shape();
  auto st = like.int_strides();
  std::vector<int> perm(sz.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](int a, int b) { return st[a] < st[b]; });
  Shape strides(sz.size());
  int64_t acc = 1;
  for (int i : perm) {
    strides[i] = acc;
    acc *= std::max<int64_t>(sz[i], 1);
  }
  return empty_strided(like.sizes(), strides, dtype);
}

Tensor empty_like(const Tensor& like) { return empty_like(like, like.dtype()); }

Tensor zeros(const Shape& sizes, DType dtype) {
  Tensor t = empty(sizes, dtype);
  if (t.numel()) std::memset(t.raw_data(), 0, t.nbytes());
  return t;
}

template <class T>
static void fill_contiguous(const Tensor& t, double v) {
  T* p = static_cast<T*>(t.raw_data());
  std::fill(p, p + t.numel(), static_cast<T>(v));
}

Tensor full(const Shape& sizes, double value, DType dtype) {
  Tensor t = empty(sizes, dtype);
  LATHE_DISPATCH_ALL_AND_HALF(dtype, "full", [&] { fill_contiguous<scalar_t>(t, value); });
  return t;
}

Tensor ones(const Shape& sizes, DType dtype) { return full(sizes, 1.0, dtype); }

Tensor arange(double start, double end, double step, DType dtype) {
  LATHE_CHECK(step != 0, "[arange] step must be non-zero");
  LATHE_CHECK(std::isfinite(start) && std::isfinite(end), "[arange] bounds must be finite");
  int64_t n = static_cast<int64_t>(std::ceil((end - start) / step));
  if (n < 0) n = 0;
  Tensor t = empty({n}, dtype);
  LATHE_DISPATCH_ALL_AND_HALF(dtype, "arange", [&] {
    scalar_t* p = t.data<scalar_t>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<scalar_t>(start + i * step);
  });
  return t;
}

Tensor arange(int64_t end) { return arange(0, static_cast<double>(end), 1, DType::i64); }

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes) {
  Tensor t = empty(sizes, DTypeOf<T>::value);
  LATHE_CHECK(static_cast<int64_t>(values.size()) == t.numel(), "[from_vector] ", values.size(),
              " values do not fill shape ", sizes, " (", t.numel(), " elements)");
  T* p = static_cast<T*>(t.raw_data());
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return t;
}
template Tensor from_vector<float>(const std::vector<float>&, const Shape&);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, const Shape&);
template Tensor from_vector<bool>(const std::vector<bool>&, const Shape&);

Tensor from_buffer(const void* data, const Shape& sizes, DType dtype) {
  Tensor t = empty(sizes, dtype);
  if (t.nbytes()) std::memcpy(t.raw_data(), data, t.nbytes());
  return t;
}

Tensor from_blob(void* data, const Shape& sizes, const Shape& strides, DType dtype,
                 std::function<void()> release) {
  check_sizes(sizes, "from_blob");
  auto impl = std::make_shared<TensorImpl>();
  int64_t span = 1;
  for (size_t i = 0; i < sizes.size(); ++i)
    span += (sizes[i].expect_int() - 1) * strides[i].expect_int();
  impl->storage = Storage::wrap(
      data, static_cast<size_t>(std::max<int64_t>(span, 0)) * itemsize(dtype), std::move(release));
  impl->sizes = sizes;
  impl->strides = strides;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.impl().storage;
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  impl->device = base.device();
  return Tensor(std::move(impl));
}

}  // namespace lathe
