// The pieces of the lathe._C extension module, one per file; module.cpp calls them in order.
#pragma once

#include <nanobind/nanobind.h>

#include <vector>

#include "lathe/core/tensor.h"

namespace lathe::python {

namespace nb = nanobind;

void bind_tensor(nb::module_& m);   // tensor_bindings.cpp: Tensor, dtypes, factories, DLPack
void bind_ops(nb::module_& m);      // ops_bindings.cpp: the functional ops
void bind_nn(nb::module_& m);       // nn_bindings.cpp: lathe.nn, lathe.io, lathe.models
void bind_compile(nb::module_& m);  // compile_bindings.cpp: lathe.compile, logs, metrics
void bind_cpu_options(nb::module_& m);  // cpu_options_bindings.cpp: lathe.cpu_options
// autograd_bindings.cpp: Tensor.requires_grad/grad/backward, lathe.backward, grad mode (called by
// bind_tensor with the Tensor class).
void bind_autograd(nb::module_& m, nb::class_<Tensor>& t);
void bind_sym(nb::module_& m);
void bind_distributed(nb::module_& m);  // distributed_bindings.cpp: lathe.distributed  // sym_bindings.cpp: lathe.SymInt, mark_dynamic/mark_static

// A tensor's sizes as Python ints; a symbolic size (inside lathe.compile) is specialized with a
// guard, so code that reads it stays correct for the traced shapes.
std::vector<int64_t> concrete_sizes(const Tensor& t);

// A size as Python sees it: an int when concrete, a lathe.SymInt when symbolic (while tracing).
nb::object sym_to_python(const SymInt& s);
// A Python sequence of ints and lathe.SymInts as a Shape (view/reshape/expand sizes).
Shape shape_from_python(nb::handle sizes);

}  // namespace lathe::python
