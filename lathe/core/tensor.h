// Tensor: a reference-counted handle to sizes, strides and an offset into a Storage.
// Copying a Tensor shares data (as in PyTorch); views share the Storage.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lathe/core/device.h"
#include "lathe/core/dtype.h"
#include "lathe/core/error.h"
#include "lathe/core/storage.h"
#include "lathe/core/sym_int.h"

namespace lathe {

class Tensor;

// State a layer above core keeps on a tensor. Core stores it without knowing its type: the layer
// subclasses TensorExtension and owns one slot (lathe/trace: the mark_dynamic / mark_static
// hints; lathe/lazy: the pending value of a lazy tensor).
struct TensorExtension {
  virtual ~TensorExtension() = default;
};
// lathe/ops keeps autograd's grad and grad_fn in the autograd slot.
enum class TensorSlot : uint8_t { compile_hints, device_value, autograd, count };

// The state behind a Tensor handle. Fake tensors (tracing) have sizes but no storage.
struct TensorImpl {
  // User-provided, so that make_shared<TensorImpl>() (value-initialization) runs the member
  // initializers only instead of zero-filling the object first: every op output makes one.
  TensorImpl() {}
  std::shared_ptr<Storage> storage;
  Shape sizes;
  Shape strides;       // in elements
  int64_t offset = 0;  // in elements
  DType dtype = DType::f32;
  Device device;
  bool requires_grad = false;
  // A module's parameter or buffer that Module::to moved onto its device: state that lives
  // there across calls, which the lazy device may freeze into its executables (lathe/lazy/
  // freezing.h: a constant of the compiled graph, guarded by its storage and version).
  bool module_state = false;
  // Upper layers' state by TensorSlot (see TensorExtension); null when a layer keeps none.
  std::shared_ptr<TensorExtension> extensions[static_cast<int>(TensorSlot::count)];

  std::shared_ptr<TensorExtension>& extension(TensorSlot s) {
    return extensions[static_cast<int>(s)];
  }
  const std::shared_ptr<TensorExtension>& extension(TensorSlot s) const {
    return extensions[static_cast<int>(s)];
  }
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl& impl() const { return *impl_; }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  // True when two handles refer to the same tensor object (not just the same data).
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  // ---- metadata ----
  DType dtype() const { return impl_->dtype; }
  Device device() const { return impl_->device; }
  int64_t dim() const { return static_cast<int64_t>(impl_->sizes.size()); }
  const Shape& sizes() const { return impl_->sizes; }
  const Shape& strides() const { return impl_->strides; }
  // Size / stride of dim d; negative d counts from the end. Throws on an out-of-range dim.
  SymInt size(int64_t d) const;
  SymInt stride(int64_t d) const;
  // Concrete sizes and strides.
  std::vector<int64_t> shape() const { return to_ints(impl_->sizes); }
  std::vector<int64_t> int_strides() const { return to_ints(impl_->strides); }
  int64_t storage_offset() const { return impl_->offset; }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * itemsize(dtype()); }
  bool is_contiguous() const;
  // Logical NCHW with NHWC memory order (PyTorch's channels_last), for 4-d tensors.
  bool is_channels_last() const;
  // True when the elements occupy a gap-free block of memory in some dim order.
  bool is_non_overlapping_and_dense() const;
  bool has_storage() const { return impl_->storage != nullptr; }
  bool requires_grad() const { return impl_->requires_grad; }
  Tensor& set_requires_grad(bool r) {
    impl_->requires_grad = r;
    return *this;
  }

  // ---- autograd (core/tensor_methods.cpp; the work is lathe_ops' autograd engine) ----
  // The gradient a backward() accumulated into this leaf; undefined before.
  Tensor grad() const;
  void set_grad(const Tensor& g) const;  // undefined: clears it (zero_grad(set_to_none))
  // True unless recorded by autograd as the result of an op (PyTorch's is_leaf).
  bool is_leaf() const;
  // The op that produced this tensor under autograd ("" for leaves).
  std::string grad_fn_name() const;
  // Backpropagates from this tensor; `gradient` may be omitted only for a one-element tensor.
  void backward(const Tensor& gradient = {}, bool retain_graph = false) const;
  // A tensor sharing this one's data (and version counter) outside autograd's graph.
  Tensor detach() const;

  // ---- data ----
  // Pointer to the first element; throws for tensors without data (fake / lazy).
  void* raw_data() const;
  template <class T>
  T* data() const {
    LATHE_CHECK(DTypeOf<T>::value == dtype(), "[data] tensor is ", dtype_name(dtype()),
                ", asked for ", dtype_name(DTypeOf<T>::value));
    return static_cast<T*>(raw_data());
  }
  // The single element as double (any dtype). Throws unless numel() == 1.
  double item() const;
  // All elements in logical (row-major) order, converted to T.
  template <class T>
  std::vector<T> to_vector() const;
  // Marks the data as modified (for caches keyed on contents).
  void bump_version() const;

  // ---- views (share storage) and copies ----
  // Defined in core (core/tensor_methods.cpp); each runs the op lathe_ops registers for it
  // (core/tensor_methods.h), so tracing, the lazy device and autograd record it. Without
  // lathe_ops linked a call is an error naming the member.
  //
  // MAY ALIAS: the views below, reshape(), contiguous(), to_channels_last() and to(DType) may
  // return a tensor sharing this one's storage (often *this itself). Never write through their
  // result (data<T>(), raw_data(), an in-place op) unless writing the caller's tensor is meant:
  // for a buffer of one's own use clone() or to_owned(), which never alias.
  Tensor view(const Shape& sizes) const;
  Tensor reshape(const Shape& sizes) const;  // a view when the strides allow, else a copy
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;  // transpose of a 2-d tensor
  Tensor narrow(int64_t dim, SymInt start, SymInt length) const;
  // Python-style slice [start:end:step] on one dim; negative and out-of-range bounds clamp.
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(const Shape& sizes) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor as_strided(const Shape& sizes, const Shape& strides, int64_t offset) const;

  Tensor contiguous() const;  // MAY ALIAS: self when already contiguous
  // NHWC memory order for a 4-d tensor (MAY ALIAS: self when already channels-last).
  Tensor to_channels_last() const;
  Tensor clone() const;       // fresh contiguous copy (never aliases)
  Tensor to(DType dt) const;  // MAY ALIAS: self when already dt
  // A fresh contiguous copy converted to dt: never shares this tensor's storage, whatever its
  // dtype and layout (to(dt).contiguous() is self for a contiguous tensor of dtype dt). The
  // buffer to write into when a computation scales or updates a copy of an input.
  Tensor to_owned(DType dt) const;
  // Defined in core (core/device_registry.cpp): moves through the device's registered transfer.
  Tensor to(Device d) const;
  // Copies src (broadcast to this shape, converting dtype) into this tensor in place.
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(double v);

  // Readable rendering: shape, dtype and (abbreviated) values.
  std::string to_string() const;
  std::string shape_string() const;  // "f32[2,3]"

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Row-major strides for sizes.
Shape contiguous_strides(const Shape& sizes);
// NHWC strides for logical NCHW sizes.
Shape channels_last_strides(const Shape& sizes);

// ---- factories (CPU) ----
// Uninitialized tensor with given sizes (row-major) and dtype.
Tensor empty(const Shape& sizes, DType dtype = DType::f32);
// Uninitialized tensor with explicit strides (must be non-overlapping and dense).
Tensor empty_strided(const Shape& sizes, const Shape& strides, DType dtype = DType::f32);
// Uninitialized tensor with the same sizes and the same dim order in memory as `like` when
// `like` is dense (so channels-last stays channels-last), else row-major.
Tensor empty_like(const Tensor& like, DType dtype);
Tensor empty_like(const Tensor& like);
Tensor zeros(const Shape& sizes, DType dtype = DType::f32);
Tensor ones(const Shape& sizes, DType dtype = DType::f32);
Tensor full(const Shape& sizes, double value, DType dtype = DType::f32);
// [start, end) in steps; dtype i64 unless any argument is fractional or dtype is given.
Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::i64);
Tensor arange(int64_t end);
// A tensor copying `values` with the given sizes (numel must match).
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes);
// A tensor copying nbytes from a raw buffer of dtype elements.
Tensor from_buffer(const void* data, const Shape& sizes, DType dtype);
// A tensor viewing memory owned elsewhere (no copy); `release` runs at the end.
Tensor from_blob(void* data, const Shape& sizes, const Shape& strides, DType dtype,
                 std::function<void()> release = {});

// Creates a view tensor over `base`'s storage (no checks beyond bounds).
Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset);

}  // namespace lathe
