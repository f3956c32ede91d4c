// lathe.Tensor: metadata, views, operators and DLPack; dtypes and the factories.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "dlpack.h"
#include "lathe/core/random.h"
#include "lathe/ops/ops.h"

namespace lathe::python {

std::vector<int64_t> concrete_sizes(const Tensor& t) {
  std::vector<int64_t> out;
  out.reserve(t.sizes().size());
  for (const SymInt& s : t.sizes()) out.push_back(static_cast<int64_t>(s));
  return out;
}

namespace {

using Release = nb::call_guard<nb::gil_scoped_release>;

std::vector<int64_t> concrete_strides(const Tensor& t) {
  std::vector<int64_t> out;
  for (const SymInt& s : t.strides()) out.push_back(static_cast<int64_t>(s));
  return out;
}

// A Python scalar b, as the other operand of a binary op on a: a 0-d tensor of the dtype PyTorch
// gives a Python scalar next to a tensor of a's dtype.
Tensor scalar_like(const Tensor& a, double b) {
  return full({}, b, promote_with_scalar(a.dtype(), b != static_cast<int64_t>(b)));
}

}  // namespace

void bind_tensor(nb::module_& m) {
  nb::enum_<DType>(m, "dtype")
      .value("bool", DType::b8)
      .value("int32", DType::i32)
      .value("int64", DType::i64)
      .value("float32", DType::f32)
      .value("float64", DType::f64)
      .value("bfloat16", DType::bf16)
      .value("float16", DType::f16)
      .export_values();
  m.def("itemsize", &itemsize);

  nb::class_<Tensor> t(m, "Tensor");
  t.def_prop_ro("shape", &concrete_sizes)
      .def("size", [](const Tensor& self) { return concrete_sizes(self); })
      .def("size", [](const Tensor& self, int64_t d) { return static_cast<int64_t>(self.size(d)); })
      // The sizes without specializing: lathe.SymInt for a symbolic size while tracing, else int.
      .def_prop_ro("sym_shape",
                   [](const Tensor& self) {
                     nb::list l;
                     for (const SymInt& s : self.sizes()) l.append(sym_to_python(s));
                     return l;
                   })
      .def("sym_size", [](const Tensor& self, int64_t d) { return sym_to_python(self.size(d)); })
      .def_prop_ro("strides", &concrete_strides)
      .def("stride", [](const Tensor& self) { return concrete_strides(self); })
      .def_prop_ro("dtype", &Tensor::dtype)
      .def_prop_ro("ndim", &Tensor::dim)
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def_prop_ro("nbytes", &Tensor::nbytes)
      .def_prop_ro("storage_offset", &Tensor::storage_offset)
      .def_prop_ro("device",
                   [](const Tensor& self) { return self.device().is_cpu() ? "cpu" : "lazy"; })
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("data_ptr",
           [](const Tensor& self) { return reinterpret_cast<uintptr_t>(self.raw_data()); })
      .def("item", &Tensor::item)
      .def("__len__",
           [](const Tensor& self) {
             LATHE_CHECK(self.dim() > 0, "[len] len() of a 0-d tensor");
             return static_cast<int64_t>(self.size(0));
           })
      .def("__repr__", &Tensor::to_string)
      .def("is_same", &Tensor::is_same)
      // Tells Lathe's caches keyed on contents (reordered weights) that the data changed: needed
      // after another library wrote into memory Lathe views (a DLPack import) in place.
      .def("bump_version", &Tensor::bump_version)
      // Views and copies.
      // Sizes may be lathe.SymInt (from sym_size while tracing): they stay symbolic.
      .def("view", [](const Tensor& s, nb::handle v) { return s.view(shape_from_python(v)); })
      .def("reshape", [](const Tensor& s, nb::handle v) { return s.reshape(shape_from_python(v)); })
      .def("expand", [](const Tensor& s, nb::handle v) { return s.expand(shape_from_python(v)); })
      .def("permute", &Tensor::permute)
      .def("transpose", &Tensor::transpose)
      .def("t", &Tensor::t)
      .def("narrow", [](const Tensor& s, int64_t d, int64_t start,
                        int64_t len) { return s.narrow(d, start, len); })
      .def("slice", &Tensor::slice, nb::arg("dim"), nb::arg("start"), nb::arg("end"),
           nb::arg("step") = 1)
      .def("select", &Tensor::select)
      .def("squeeze", nb::overload_cast<>(&Tensor::squeeze, nb::const_))
      .def("squeeze", nb::overload_cast<int64_t>(&Tensor::squeeze, nb::const_))
      .def("unsqueeze", &Tensor::unsqueeze)
      .def("flatten", &Tensor::flatten, nb::arg("start_dim") = 0, nb::arg("end_dim") = -1)
      .def("contiguous", &Tensor::contiguous, Release())
      .def("clone", &Tensor::clone, Release())
      .def("to", nb::overload_cast<DType>(&Tensor::to, nb::const_), Release())
      .def(
          "copy_", [](Tensor& s, const Tensor& src) { return Tensor(s.copy_(src)); }, Release())
      .def(
          "fill_", [](Tensor& s, double v) { return Tensor(s.fill_(v)); }, Release())
      // Operators, with PyTorch's promotion for Python scalars.
      .def(
          "__add__", [](const Tensor& a, const Tensor& b) { return add(a, b); }, Release())
      .def(
          "__add__", [](const Tensor& a, double b) { return add(a, b); }, Release())
      .def(
          "__radd__", [](const Tensor& a, double b) { return add(a, b); }, Release())
      .def(
          "__sub__", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, Release())
      .def(
          "__sub__", [](const Tensor& a, double b) { return sub(a, b); }, Release())
      .def(
          "__rsub__", [](const Tensor& a, double b) { return rsub(a, b); }, Release())
      .def(
          "__mul__", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, Release())
      .def(
          "__mul__", [](const Tensor& a, double b) { return mul(a, b); }, Release())
      .def(
          "__rmul__", [](const Tensor& a, double b) { return mul(a, b); }, Release())
      .def(
          "__truediv__", [](const Tensor& a, const Tensor& b) { return div(a, b); }, Release())
      .def(
          "__truediv__", [](const Tensor& a, double b) { return div(a, b); }, Release())
      .def(
          "__rtruediv__", [](const Tensor& a, double b) { return div(scalar_like(a, b), a); },
          Release())
      .def(
          "__pow__", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, Release())
      .def(
          "__pow__", [](const Tensor& a, double b) { return pow(a, b); }, Release())
      .def(
          "__matmul__", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }, Release())
      .def(
          "__neg__", [](const Tensor& a) { return neg(a); }, Release())
      .def(
          "__abs__", [](const Tensor& a) { return abs(a); }, Release())
      .def(
          "__eq__", [](const Tensor& a, const Tensor& b) { return eq(a, b); }, Release())
      .def(
          "__eq__", [](const Tensor& a, double b) { return eq(a, b); }, Release())
      .def(
          "__ne__", [](const Tensor& a, const Tensor& b) { return ne(a, b); }, Release())
      .def(
          "__ne__", [](const Tensor& a, double b) { return ne(a, b); }, Release())
      .def(
          "__lt__", [](const Tensor& a, const Tensor& b) { return lt(a, b); }, Release())
      .def(
          "__lt__", [](const Tensor& a, double b) { return lt(a, b); }, Release())
      .def(
          "__le__", [](const Tensor& a, const Tensor& b) { return le(a, b); }, Release())
      .def(
          "__le__", [](const Tensor& a, double b) { return le(a, b); }, Release())
      .def(
          "__gt__", [](const Tensor& a, const Tensor& b) { return gt(a, b); }, Release())
      .def(
          "__gt__", [](const Tensor& a, double b) { return gt(a, b); }, Release())
      .def(
          "__ge__", [](const Tensor& a, const Tensor& b) { return ge(a, b); }, Release())
      .def(
          "__ge__", [](const Tensor& a, double b) { return ge(a, b); }, Release())
      .def("__hash__",
           [](const Tensor& a) { return reinterpret_cast<intptr_t>(a.impl_ptr().get()); })
      // DLPack producer protocol. Lathe's memory is always host memory, so stream is ignored.
      .def(
          "__dlpack__",
          [](const Tensor& self, nb::object stream, nb::object max_version, nb::object dl_device,
             nb::object copy) {
            // max_version (major, minor): the newest DLPack the consumer understands.
            const bool versioned =
                !max_version.is_none() && nb::cast<int64_t>(nb::tuple(max_version)[0]) >= 1;
            if (!copy.is_none() && nb::cast<bool>(copy)) {
              Tensor c;
              {
                nb::gil_scoped_release r;
                c = self.clone();
              }
              return to_dlpack_capsule(c, versioned);
            }
            return to_dlpack_capsule(self, versioned);
          },
          nb::kw_only(), nb::arg("stream").none() = nb::none(),
          nb::arg("max_version").none() = nb::none(), nb::arg("dl_device").none() = nb::none(),
          nb::arg("copy").none() = nb::none())
      .def("__dlpack_device__", [](const Tensor&) { return nb::make_tuple(1, 0); });
  bind_autograd(m, t);

  m.def("_from_dlpack", &from_dlpack_object, nb::arg("obj"));

  // Factories.
  m.def(
      "empty", [](const std::vector<int64_t>& s, DType dt) { return empty(to_shape(s), dt); },
      nb::arg("shape"), nb::arg("dtype") = DType::f32);
  m.def(
      "zeros", [](const std::vector<int64_t>& s, DType dt) { return zeros(to_shape(s), dt); },
      nb::arg("shape"), nb::arg("dtype") = DType::f32, Release());
  m.def(
      "ones", [](const std::vector<int64_t>& s, DType dt) { return ones(to_shape(s), dt); },
      nb::arg("shape"), nb::arg("dtype") = DType::f32, Release());
  m.def(
      "full",
      [](const std::vector<int64_t>& s, double v, DType dt) { return full(to_shape(s), v, dt); },
      nb::arg("shape"), nb::arg("value"), nb::arg("dtype") = DType::f32, Release());
  m.def(
      "arange",
      [](double start, double end, double step, std::optional<DType> dt) {
        return dt ? arange(start, end, step, *dt) : arange(start, end, step);
      },
      nb::arg("start"), nb::arg("end"), nb::arg("step") = 1.0,
      nb::arg("dtype").none() = nb::none());
  m.def(
      "randn", [](const std::vector<int64_t>& s, DType dt) { return randn(to_shape(s), dt); },
      nb::arg("shape"), nb::arg("dtype") = DType::f32, Release());
  m.def("manual_seed", &manual_seed, nb::arg("seed"));
}

}  // namespace lathe::python
