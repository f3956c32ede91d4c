// Registers the ops behind Tensor's view, copy and autograd members with core
// (core/tensor_methods.h). ops/link.h calls link_tensor_methods() from every translation unit that
// includes it (ops.h does; the build force-includes it into the layers above core), so every
// program that uses Lathe above core has this object and its registration, however it is linked
// (static archives in any order, a shared library, any build system): no linker flag.
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"

namespace lathe {
namespace {

detail::TensorOpFunctions make_functions() {
  detail::TensorOpFunctions f;
  detail::set_view_functions(f);
  detail::set_copy_functions(f);
  detail::set_autograd_functions(f);
  return f;
}

}  // namespace

bool detail::link_tensor_methods() {
  // A function-local static: other translation units call this during their own static
  // initialization, in an order the language leaves open.
  static const TensorOpFunctions functions = make_functions();
  static const bool registered = (register_tensor_op_functions(&functions), true);
  return registered;
}

}  // namespace lathe
