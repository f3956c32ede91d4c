#include "lathe/ops/register.h"

namespace lathe::detail {

void register_shape_ops(OpRegistry& r) {}

}  // namespace lathe::detail
