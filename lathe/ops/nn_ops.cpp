#include "lathe/ops/register.h"

namespace lathe::detail {

void register_nn_ops(OpRegistry& r) {}

}  // namespace lathe::detail
