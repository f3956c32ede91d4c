#include "dlpack.h"

#include <cstdint>
#include <vector>

namespace lathe::python {
namespace nb = nanobind;

namespace {

// The DLPack ABI (v0.x unversioned structs), written from the specification.
struct DLDevice {
  int32_t device_type;  // 1 = kDLCPU
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // 0 int, 1 uint, 2 float, 6 bool
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; may be null for row-major
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

// DLPack >= 1.0: the same tensor behind a version and flags (read-only, copied), in a capsule
// named "dltensor_versioned". numpy treats memory from the unversioned capsule as read-only.
struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

constexpr int32_t kDLCPU = 1;
constexpr uint8_t kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6;
constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";
constexpr const char* kVersionedCapsuleName = "dltensor_versioned";

DLDataType to_dl_dtype(DType dt) {
  switch (dt) {
    case DType::b8:
      return {kDLBool, 8, 1};
    case DType::i32:
      return {kDLInt, 32, 1};
    case DType::i64:
      return {kDLInt, 64, 1};
    case DType::f32:
      return {kDLFloat, 32, 1};
    case DType::f64:
      return {kDLFloat, 64, 1};
    case DType::bf16:
      return {kDLBfloat, 16, 1};
    case DType::f16:
      return {kDLFloat, 16, 1};
  }
  throw Error("[dlpack] unknown dtype");
}

DType from_dl_dtype(DLDataType t) {
  LATHE_CHECK(t.lanes == 1, "[dlpack] vector dtypes (lanes=", int(t.lanes), ") are not supported");
  if (t.code == kDLFloat && t.bits == 32) return DType::f32;
  if (t.code == kDLFloat && t.bits == 64) return DType::f64;
  if (t.code == kDLBfloat && t.bits == 16) return DType::bf16;
  if (t.code == kDLFloat && t.bits == 16) return DType::f16;
  if (t.code == kDLInt && t.bits == 64) return DType::i64;
  if (t.code == kDLInt && t.bits == 32) return DType::i32;
  // numpy before 1.25 exported bool as uint8 is not accepted: its values could be any byte.
  if (t.code == kDLBool && t.bits == 8) return DType::b8;
  throw Error(detail::str(
      "[dlpack] dtype (code ", int(t.code), ", ", int(t.bits),
      " bits) has no Lathe equivalent (Lathe has f32, f64, bf16, f16, i64, i32, bool)"));
}

// Owns what an exported DLManagedTensor points into.
struct ExportContext {
  Tensor tensor;
  std::vector<int64_t> shape, strides;
  DLManagedTensor managed;
  DLManagedTensorVersioned versioned;
};

void delete_export(DLManagedTensor* m) { delete static_cast<ExportContext*>(m->manager_ctx); }
void delete_export_versioned(DLManagedTensorVersioned* m) {
  delete static_cast<ExportContext*>(m->manager_ctx);
}

void versioned_capsule_destructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kVersionedCapsuleName)) {
    auto* m = static_cast<DLManagedTensorVersioned*>(
        PyCapsule_GetPointer(capsule, kVersionedCapsuleName));
    if (m && m->deleter) m->deleter(m);
  }
}

void capsule_destructor(PyObject* capsule) {
  // A consumer renames the capsule when it takes ownership; otherwise nobody did.
  if (PyCapsule_IsValid(capsule, kCapsuleName)) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
    if (m && m->deleter) m->deleter(m);
  }
}

}  // namespace

nb::object to_dlpack_capsule(const Tensor& t, bool versioned) {
  LATHE_CHECK(t.device().is_cpu() && t.has_storage(),
              "[dlpack] only CPU tensors with data can be exported (got ", t.shape_string(), " on ",
              (t.device().is_cpu() ? "cpu" : "lazy"), ")");
  auto* ctx = new ExportContext{t, t.shape(), t.int_strides(), {}, {}};
  DLTensor& dl = ctx->managed.dl_tensor;
  dl.data = t.numel() == 0 ? nullptr : t.raw_data();
  dl.device = {kDLCPU, 0};
  dl.ndim = static_cast<int32_t>(ctx->shape.size());
  dl.dtype = to_dl_dtype(t.dtype());
  dl.shape = ctx->shape.data();
  dl.strides = ctx->strides.data();
  dl.byte_offset = 0;
  PyObject* cap = nullptr;
  if (versioned) {
    ctx->versioned.version = {1, 0};
    ctx->versioned.manager_ctx = ctx;
    ctx->versioned.deleter = delete_export_versioned;
    ctx->versioned.flags = 0;  // writable, not a copy
    ctx->versioned.dl_tensor = dl;
    cap = PyCapsule_New(&ctx->versioned, kVersionedCapsuleName, versioned_capsule_destructor);
  } else {
    ctx->managed.manager_ctx = ctx;
    ctx->managed.deleter = delete_export;
    cap = PyCapsule_New(&ctx->managed, kCapsuleName, capsule_destructor);
  }
  if (!cap) {
    delete ctx;
    throw nb::python_error();
  }
  return nb::steal(cap);
}

Tensor from_dlpack_object(nb::handle obj) {
  nb::object capsule = obj.attr("__dlpack__")();
  PyObject* cap = capsule.ptr();
  LATHE_CHECK(PyCapsule_IsValid(cap, kCapsuleName),
              "[dlpack] __dlpack__() did not return an unused 'dltensor' capsule");
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, kCapsuleName));
  const DLTensor& dl = m->dl_tensor;
  auto release_managed = [m] {
    if (m->deleter) m->deleter(m);
  };
  if (dl.device.device_type != kDLCPU) {
    throw Error(detail::str("[dlpack] only CPU memory can be imported (device type ",
                            dl.device.device_type, ")"));
  }
  DType dtype = from_dl_dtype(dl.dtype);  // before taking ownership: a throw leaves the capsule
  std::vector<int64_t> sizes(dl.shape, dl.shape + dl.ndim);
  std::vector<int64_t> strides(dl.ndim);
  if (dl.strides) {
    strides.assign(dl.strides, dl.strides + dl.ndim);
  } else {
    int64_t s = 1;
    for (int i = dl.ndim - 1; i >= 0; --i) {
      strides[i] = s;
      s *= sizes[i];
    }
  }
  for (int i = 0; i < dl.ndim; ++i) {
    LATHE_CHECK(strides[i] >= 0 || sizes[i] <= 1, "[dlpack] negative strides are not supported");
  }
  PyCapsule_SetName(cap, kUsedCapsuleName);
  char* data = static_cast<char*>(dl.data) + dl.byte_offset;
  // The producer's deleter may touch Python objects (numpy decrefs its array), and the last
  // lathe view may die on a thread without the GIL (inside a compiled graph).
  return from_blob(data, to_shape(sizes), to_shape(strides), dtype, [release_managed] {
    if (Py_IsInitialized()) {
      nb::gil_scoped_acquire gil;
      release_managed();
    }
  });
}

}  // namespace lathe::python
