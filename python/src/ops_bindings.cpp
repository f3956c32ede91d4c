// The functional ops of lathe/ops/ops.h, named as there. Kernels run with the GIL released.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "lathe/ops/ops.h"

namespace lathe::python {

namespace {
using Release = nb::call_guard<nb::gil_scoped_release>;
using nb::arg;

// An optional tensor argument: None becomes an undefined Tensor (the C++ API's "absent").
Tensor opt(const std::optional<Tensor>& t) { return t ? *t : Tensor(); }

template <Tensor (*F)(const Tensor&, const Tensor&), Tensor (*G)(const Tensor&, double)>
void binary(nb::module_& m, const char* name) {
  m.def(
      name, [](const Tensor& a, const Tensor& b) { return F(a, b); }, Release());
  m.def(
      name, [](const Tensor& a, double b) { return G(a, b); }, Release());
}

}  // namespace

void bind_ops(nb::module_& m) {
  m.def(
      "add", [](const Tensor& a, const Tensor& b, double alpha) { return add(a, b, alpha); },
      arg("a"), arg("b"), arg("alpha") = 1.0, Release());
  m.def(
      "add", [](const Tensor& a, double b) { return add(a, b); }, Release());
  m.def(
      "sub", [](const Tensor& a, const Tensor& b, double alpha) { return sub(a, b, alpha); },
      arg("a"), arg("b"), arg("alpha") = 1.0, Release());
  m.def(
      "sub", [](const Tensor& a, double b) { return sub(a, b); }, Release());
  m.def(
      "rsub", [](const Tensor& a, double b) { return rsub(a, b); }, Release());
  binary<mul, mul>(m, "mul");
  binary<div, div>(m, "div");
  binary<pow, pow>(m, "pow");
  binary<eq, eq>(m, "eq");
  binary<ne, ne>(m, "ne");
  binary<lt, lt>(m, "lt");
  binary<le, le>(m, "le");
  binary<gt, gt>(m, "gt");
  binary<ge, ge>(m, "ge");
  m.def("maximum", &maximum, Release());
  m.def("minimum", &minimum, Release());
  m.def("logical_not", &logical_not, Release());
  m.def("where", nb::overload_cast<const Tensor&, const Tensor&, const Tensor&>(&where), Release());
  m.def("where", nb::overload_cast<const Tensor&, const Tensor&, double>(&where), Release());

  for (auto [name, fn] : std::initializer_list<std::pair<const char*, Tensor (*)(const Tensor&)>>{
           {"neg", &neg},
           {"abs", &abs},
           {"exp", &exp},
           {"log", &log},
           {"sqrt", &sqrt},
           {"rsqrt", &rsqrt},
           {"tanh", &tanh},
           {"sigmoid", &sigmoid},
           {"erf", &erf},
           {"relu", &relu},
           {"relu6", &relu6},
           {"hardswish", &hardswish},
           {"hardsigmoid", &hardsigmoid},
           {"silu", &silu}}) {
    m.def(name, fn, arg("x"), Release());
  }
  m.def("hardtanh", &hardtanh, arg("x"), arg("min_val") = -1.0, arg("max_val") = 1.0, Release());
  m.def("gelu", &gelu, arg("x"), arg("approximate") = "none", Release());
  m.def("clamp", &clamp, arg("x"), arg("min").none() = nb::none(), arg("max").none() = nb::none(),
        Release());

  m.def("matmul", &matmul, Release());
  m.def(
      "linear",
      [](const Tensor& x, const Tensor& w, const std::optional<Tensor>& b) {
        return linear(x, w, opt(b));
      },
      arg("x"), arg("weight"), arg("bias").none() = nb::none(), Release());
  m.def(
      "conv2d",
      [](const Tensor& x, const Tensor& w, const std::optional<Tensor>& b,
         std::vector<int64_t> stride, std::vector<int64_t> padding, std::vector<int64_t> dilation,
         int64_t groups) { return conv2d(x, w, opt(b), stride, padding, dilation, groups); },
      arg("x"), arg("weight"), arg("bias").none() = nb::none(),
      arg("stride") = std::vector<int64_t>{1, 1}, arg("padding") = std::vector<int64_t>{0, 0},
      arg("dilation") = std::vector<int64_t>{1, 1}, arg("groups") = 1, Release());
  m.def("max_pool2d", &max_pool2d, arg("x"), arg("kernel_size"),
        arg("stride") = std::vector<int64_t>{}, arg("padding") = std::vector<int64_t>{0, 0},
        arg("dilation") = std::vector<int64_t>{1, 1}, arg("ceil_mode") = false, Release());
  m.def("avg_pool2d", &avg_pool2d, arg("x"), arg("kernel_size"),
        arg("stride") = std::vector<int64_t>{}, arg("padding") = std::vector<int64_t>{0, 0},
        arg("ceil_mode") = false, arg("count_include_pad") = true, Release());
  m.def("adaptive_avg_pool2d", &adaptive_avg_pool2d, arg("x"), arg("output_size"), Release());
  m.def(
      "batch_norm",
      [](const Tensor& x, const std::optional<Tensor>& rm, const std::optional<Tensor>& rv,
         const std::optional<Tensor>& w, const std::optional<Tensor>& b, bool training,
         double momentum, double eps) {
        return batch_norm(x, opt(rm), opt(rv), opt(w), opt(b), training, momentum, eps);
      },
      arg("x"), arg("running_mean"), arg("running_var"), arg("weight").none() = nb::none(),
      arg("bias").none() = nb::none(), arg("training") = false, arg("momentum") = 0.1,
      arg("eps") = 1e-5, Release());
  m.def(
      "layer_norm",
      [](const Tensor& x, std::vector<int64_t> shape, const std::optional<Tensor>& w,
         const std::optional<Tensor>& b,
         double eps) { return layer_norm(x, shape, opt(w), opt(b), eps); },
      arg("x"), arg("normalized_shape"), arg("weight").none() = nb::none(),
      arg("bias").none() = nb::none(), arg("eps") = 1e-5, Release());
  m.def("softmax", &softmax, arg("x"), arg("dim"), Release());
  m.def("log_softmax", &log_softmax, arg("x"), arg("dim"), Release());
  m.def("dropout", &dropout, arg("x"), arg("p") = 0.5, arg("training") = false, Release());
  m.def("embedding", &embedding, arg("weight"), arg("indices"), Release());
  m.def("nll_loss", &nll_loss, arg("log_probs"), arg("target"), arg("reduction") = "mean",
        arg("ignore_index") = -100, Release());
  m.def("cross_entropy", &cross_entropy, arg("logits"), arg("target"), arg("reduction") = "mean",
        arg("ignore_index") = -100, Release());
  m.def(
      "scaled_dot_product_attention",
      [](const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& mask,
         bool is_causal, std::optional<double> scale) {
        return scaled_dot_product_attention(q, k, v, opt(mask), is_causal, scale);
      },
      arg("q"), arg("k"), arg("v"), arg("mask").none() = nb::none(), arg("is_causal") = false,
      arg("scale").none() = nb::none(), Release());

  m.def("cat", &cat, arg("tensors"), arg("dim") = 0, Release());
  m.def("stack", &stack, arg("tensors"), arg("dim") = 0, Release());
  m.def("split", nb::overload_cast<const Tensor&, int64_t, int64_t>(&split), arg("x"),
        arg("split_size"), arg("dim") = 0, Release());
  m.def("split", nb::overload_cast<const Tensor&, const std::vector<int64_t>&, int64_t>(&split),
        arg("x"), arg("sizes"), arg("dim") = 0, Release());
  m.def("chunk", &chunk, arg("x"), arg("chunks"), arg("dim") = 0, Release());

  for (auto [name, fn] : std::initializer_list<
           std::pair<const char*, Tensor (*)(const Tensor&, std::vector<int64_t>, bool)>>{
           {"sum", &sum}, {"mean", &mean}, {"amax", &amax}, {"amin", &amin}}) {
    m.def(name, fn, arg("x"), arg("dim") = std::vector<int64_t>{}, arg("keepdim") = false,
          Release());
  }
  m.def("max", &lathe::max, arg("x"), arg("dim"), arg("keepdim") = false, Release());
  m.def("min", &lathe::min, arg("x"), arg("dim"), arg("keepdim") = false, Release());
  m.def("argmax", &argmax, arg("x"), arg("dim"), arg("keepdim") = false, Release());
  m.def("argmin", &argmin, arg("x"), arg("dim"), arg("keepdim") = false, Release());
  m.def("var", &var, arg("x"), arg("dim") = std::vector<int64_t>{}, arg("correction") = 1,
        arg("keepdim") = false, Release());
  m.def("std", &std_dev, arg("x"), arg("dim") = std::vector<int64_t>{}, arg("correction") = 1,
        arg("keepdim") = false, Release());
}

}  // namespace lathe::python
