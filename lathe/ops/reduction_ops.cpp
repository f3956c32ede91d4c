#include "lathe/ops/register.h"

namespace lathe::detail {

void register_reduction_ops(OpRegistry& r) {}

}  // namespace lathe::detail
