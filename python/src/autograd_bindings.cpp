// Lathe's autograd from Python: requires_grad, grad, backward, grad mode. The torch.compile
// backend (lathe.torch) uses these to train through Lathe's compiled forward and backward.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>

#include "bindings.h"
#include "lathe/core/autocast_state.h"
#include "lathe/core/grad_mode.h"
#include "lathe/ops/autograd.h"

namespace lathe::python {

namespace {

std::optional<Tensor> defined_or_none(const Tensor& t) {
  if (!t.defined()) return std::nullopt;
  return t;
}

}  // namespace

void bind_autograd(nb::module_& m, nb::class_<Tensor>& t) {
  t.def_prop_rw(
       "requires_grad", [](const Tensor& self) { return self.requires_grad(); },
       [](Tensor& self, bool r) { self.set_requires_grad(r); })
      .def(
          "requires_grad_",
          [](Tensor& self, bool r) {
            self.set_requires_grad(r);
            return self;
          },
          nb::arg("requires_grad") = true)
      // The gradient backward() accumulated into this leaf (None before); assigning None clears it.
      .def_prop_rw(
          "grad", [](const Tensor& self) { return defined_or_none(self.grad()); },
          [](const Tensor& self, nb::handle g) {
            self.set_grad(g.is_none() ? Tensor() : nb::cast<Tensor>(g));
          },
          nb::for_setter(nb::arg("grad").none()))
      .def_prop_ro("is_leaf", &Tensor::is_leaf)
      .def_prop_ro("grad_fn_name", &Tensor::grad_fn_name)
      .def("detach", &Tensor::detach)
      .def(
          "backward",
          [](const Tensor& self, std::optional<Tensor> gradient, bool retain_graph) {
            nb::gil_scoped_release r;
            self.backward(gradient ? *gradient : Tensor(), retain_graph);
          },
          nb::arg("gradient").none() = nb::none(), nb::arg("retain_graph") = false);

  // Backpropagates from several roots at once (None in grads: ones, for one-element roots).
  m.def(
      "backward",
      [](const std::vector<Tensor>& roots, const nb::list& grads, bool retain_graph) {
        std::vector<Tensor> g;
        g.reserve(grads.size());
        for (nb::handle x : grads) g.push_back(x.is_none() ? Tensor() : nb::cast<Tensor>(x));
        nb::gil_scoped_release r;
        autograd::backward(roots, g, retain_graph);
      },
      nb::arg("tensors"), nb::arg("grad_tensors"), nb::arg("retain_graph") = false);
  // Grad mode is per thread, as in PyTorch; lathe.no_grad() (python/lathe/_autograd.py) wraps it.
  m.def("is_grad_enabled", &GradMode::is_enabled);
  m.def("set_grad_enabled", &GradMode::set_enabled, nb::arg("enabled"));
  // Autocast is per thread too; lathe.autocast() (python/lathe/_autograd.py) wraps it.
  m.def("autocast_state", [] {
    const detail::AutocastState& s = detail::autocast_state();
    return std::make_pair(s.enabled, s.dtype);
  });
  m.def(
      "set_autocast_state",
      [](bool enabled, DType dtype) {
        LATHE_CHECK(dtype == DType::bf16 || dtype == DType::f16,
                    "[autocast] the autocast dtype is lathe.bfloat16 or lathe.float16, got ",
                    dtype_name(dtype));
        detail::autocast_state() = detail::AutocastState{enabled, dtype};
      },
      nb::arg("enabled"), nb::arg("dtype"));
}

}  // namespace lathe::python
