// lathe._C: the native half of the `lathe` Python package (python/lathe/ is the other half).
#include <nanobind/nanobind.h>

#include "bindings.h"
#include "lathe/core/dispatch_mode.h"
#include "lathe/core/error.h"
#include "lathe/core/version.h"

NB_MODULE(_C, m) {
  namespace nb = nanobind;
  m.doc() = "Lathe's C++ library: tensors, ops, modules, the compiler";
  // lathe/base/version.h, the version pyproject.toml gives the wheel too.
  m.attr("__version__") = lathe::version();
  // Objects still held at exit by caches outside our control (torch.compile's, functools') are
  // reported as leaks by nanobind; they are not.
  nb::set_leak_warnings(false);
  // lathe::Error reaches Python as lathe.Error (a RuntimeError) with Lathe's message.
  nb::exception<lathe::Error> error(m, "Error", PyExc_RuntimeError);
  // A read of traced data (graph break): lathe.compile's C++ side turns it back into the C++
  // type when it comes out of the Python function, and splits the function into regions.
  nb::exception<lathe::DataReadWhileTracing>(m, "DataReadWhileTracing", error);
  lathe::python::bind_sym(m);  // before the tensor methods that return and take lathe.SymInt
  lathe::python::bind_tensor(m);
  lathe::python::bind_ops(m);
  lathe::python::bind_nn(m);
  lathe::python::bind_compile(m);
  lathe::python::bind_cpu_options(m);
  lathe::python::bind_distributed(m);
}
