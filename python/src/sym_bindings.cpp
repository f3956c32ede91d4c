// lathe.SymInt: a symbolic size seen by a Python function while lathe.compile traces it
// (Tensor.sym_size / sym_shape), so that sizes computed from the inputs' dynamic dims stay symbols
// in the graph instead of being specialized to the traced values. Also mark_dynamic /
// mark_static, which say how a tensor's dims are traced.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "lathe/trace/compile.h"

namespace lathe::python {

namespace {

// Python-facing operand: a lathe.SymInt or a Python int (bool excluded, as PyTorch does for sizes).
std::optional<SymInt> as_sym(nb::handle h) {
  if (nb::isinstance<SymInt>(h)) return nb::cast<SymInt>(h);
  if (PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr())) return SymInt(nb::cast<int64_t>(h));
  return std::nullopt;
}

template <class Op>
nb::object binary(const SymInt& a, nb::handle b, Op op) {
  std::optional<SymInt> o = as_sym(b);
  if (!o) return nb::borrow(Py_NotImplemented);
  return sym_to_python(op(a, *o));
}

template <class Op>
nb::object reflected(const SymInt& a, nb::handle b, Op op) {
  std::optional<SymInt> o = as_sym(b);
  if (!o) return nb::borrow(Py_NotImplemented);
  return sym_to_python(op(*o, a));
}

template <class Cmp>
nb::object compare(const SymInt& a, nb::handle b, Cmp cmp, const char* reason) {
  std::optional<SymInt> o = as_sym(b);
  if (!o) return nb::borrow(Py_NotImplemented);
  // A Python branch on sizes: decided from the trace's values, with a guard when it is not
  // provable.
  return nb::bool_(cmp(a, *o).guard(reason));
}

}  // namespace

nb::object sym_to_python(const SymInt& s) {
  if (std::optional<int64_t> v = s.maybe_int()) return nb::int_(*v);
  return nb::cast(s);
}

Shape shape_from_python(nb::handle sizes) {
  Shape out;
  for (nb::handle h : sizes) {
    std::optional<SymInt> s = as_sym(h);
    LATHE_CHECK(s.has_value(), "[shape] a size is a ",
                nb::cast<std::string>(nb::type_name(h.type())), "; sizes are ints or lathe.SymInt");
    out.push_back(*s);
  }
  return out;
}

void bind_sym(nb::module_& m) {
  // Only meaningful while lathe.compile traces (the symbols belong to that trace): do not keep one
  // past the traced function.
  nb::class_<SymInt>(m, "SymInt")
      .def("__repr__", &SymInt::to_string)
      .def_prop_ro("hint", &SymInt::hint)  // the traced value, no guard recorded
      .def("__int__", [](const SymInt& s) { return s.guard_int("int(lathe.SymInt)"); })
      .def("__index__", [](const SymInt& s) { return s.guard_int("index(lathe.SymInt)"); })
      .def("__add__", [](const SymInt& a, nb::handle b) { return binary(a, b, std::plus<>()); })
      .def("__radd__", [](const SymInt& a, nb::handle b) { return reflected(a, b, std::plus<>()); })
      .def("__sub__", [](const SymInt& a, nb::handle b) { return binary(a, b, std::minus<>()); })
      .def("__rsub__",
           [](const SymInt& a, nb::handle b) { return reflected(a, b, std::minus<>()); })
      .def("__mul__",
           [](const SymInt& a, nb::handle b) { return binary(a, b, std::multiplies<>()); })
      .def("__rmul__",
           [](const SymInt& a, nb::handle b) { return reflected(a, b, std::multiplies<>()); })
      .def("__floordiv__",
           [](const SymInt& a, nb::handle b) {
             return binary(a, b, [](SymInt x, SymInt y) { return floor_div(x, y); });
           })
      .def("__rfloordiv__",
           [](const SymInt& a, nb::handle b) {
             return reflected(a, b, [](SymInt x, SymInt y) { return floor_div(x, y); });
           })
      .def("__mod__",
           [](const SymInt& a, nb::handle b) {
             return binary(a, b, [](SymInt x, SymInt y) { return sym::mod(x, y); });
           })
      .def("__neg__", [](const SymInt& a) { return sym_to_python(SymInt(0) - a); })
      .def("__eq__",
           [](const SymInt& a, nb::handle b) {
             return compare(a, b, std::equal_to<>(), "lathe.SymInt ==");
           })
      .def("__ne__",
           [](const SymInt& a, nb::handle b) {
             return compare(a, b, std::not_equal_to<>(), "lathe.SymInt !=");
           })
      .def("__lt__", [](const SymInt& a,
                        nb::handle b) { return compare(a, b, std::less<>(), "lathe.SymInt <"); })
      .def("__le__",
           [](const SymInt& a, nb::handle b) {
             return compare(a, b, std::less_equal<>(), "lathe.SymInt <=");
           })
      .def("__gt__", [](const SymInt& a,
                        nb::handle b) { return compare(a, b, std::greater<>(), "lathe.SymInt >"); })
      .def("__ge__", [](const SymInt& a, nb::handle b) {
        return compare(a, b, std::greater_equal<>(), "lathe.SymInt >=");
      });

  m.def(
      "mark_dynamic",
      [](const Tensor& t, int64_t dim, int64_t min, int64_t max) {
        mark_dynamic(t, dim, min, max);
      },
      nb::arg("tensor"), nb::arg("dim"), nb::arg("min") = 2, nb::arg("max") = INT64_MAX);
  m.def(
      "mark_static",
      [](const Tensor& t, nb::handle dims) {
        if (PyLong_Check(dims.ptr())) {
          mark_static(t, nb::cast<int64_t>(dims));
          return;
        }
        for (nb::handle d : dims) mark_static(t, nb::cast<int64_t>(d));
      },
      nb::arg("tensor"), nb::arg("dims"));
}

}  // namespace lathe::python
