// Registers the ops behind Tensor's view, copy and autograd members with core
// (core/tensor_methods.h) at static initialization.
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

const detail::TensorOpFunctions tensor_op_functions = make_functions();

const bool tensor_op_functions_registered =
    (detail::register_tensor_op_functions(&tensor_op_functions), true);

}  // namespace
}  // namespace lathe

// CMakeLists.txt links every user of lathe_ops with --undefined=lathe_ops_tensor_methods_anchor,
// so this object (and the registration above) is in every program that can call Tensor::view.
extern "C" {
int lathe_ops_tensor_methods_anchor = 0;
}
