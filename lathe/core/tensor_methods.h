// Tensor's members whose work is an op (views, copies, autograd). Tensor declares them in core and
// core defines them (tensor_methods.cpp); each forwards to the function lathe_ops registers here
// at static initialization, so tracing, the lazy device and autograd see them as ops while core
// names nothing above it (the device registry, device_registry.h, does the same for devices).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lathe/core/dtype.h"
#include "lathe/core/sym_int.h"

namespace lathe {

class Tensor;

namespace detail {

// The op behind each member; every function is set by lathe_ops (ops/tensor_methods.cpp).
struct TensorOpFunctions {
  // ---- view ops (view_ops.cpp) ----
  Tensor (*view)(const Tensor& x, const Shape& sizes) = nullptr;
  Tensor (*reshape)(const Tensor& x, const Shape& sizes) = nullptr;
  Tensor (*permute)(const Tensor& x, const std::vector<int64_t>& dims) = nullptr;
  // [start, end) in steps along `dim`, as the slice op takes them (negative dims and bounds wrap,
  // out-of-range bounds clamp); concrete bounds are recorded as ints, symbolic ones as sizes.
  Tensor (*slice)(const Tensor& x, int64_t dim, SymInt start, SymInt end, int64_t step) = nullptr;
  Tensor (*select)(const Tensor& x, int64_t dim, int64_t index) = nullptr;
  Tensor (*expand)(const Tensor& x, const Shape& sizes) = nullptr;
  // Removes the size-1 dims among `dims` (every size-1 dim when empty).
  Tensor (*squeeze)(const Tensor& x, const Shape& dims) = nullptr;
  Tensor (*unsqueeze)(const Tensor& x, int64_t dim) = nullptr;
  Tensor (*as_strided)(const Tensor& x, const Shape& sizes, const Shape& strides,
                       int64_t offset) = nullptr;
  // ---- copies (copy_ops.cpp) ----
  // A copy in `memory_format` ("contiguous", "channels_last", "preserve"), converted to `dtype`.
  Tensor (*clone)(const Tensor& x, const char* memory_format, std::optional<DType> dtype) = nullptr;
  void (*copy_)(const Tensor& self, const Tensor& src) = nullptr;
  void (*fill_)(const Tensor& self, double value) = nullptr;
  // ---- autograd (autograd.cpp) ----
  Tensor (*grad)(const Tensor& x) = nullptr;
  void (*set_grad)(const Tensor& x, const Tensor& grad) = nullptr;
  bool (*is_leaf)(const Tensor& x) = nullptr;
  std::string (*grad_fn_name)(const Tensor& x) = nullptr;
  void (*backward)(const Tensor& x, const Tensor& gradient, bool retain_graph) = nullptr;
  Tensor (*detach)(const Tensor& x) = nullptr;
};

// Registers the implementation (lathe_ops does, once); `fns` must outlive its use.
void register_tensor_op_functions(const TensorOpFunctions* fns);
// The registered implementation; throws "[what] Tensor's op members are implemented by lathe_ops,
// which is not in this program" when there is none (lathe/ops/ops.h registers it).
const TensorOpFunctions& tensor_op_functions(const char* what);

}  // namespace detail
}  // namespace lathe
