#include "lathe/ops/register.h"

namespace lathe::detail {

void register_elementwise_ops(OpRegistry& r) {}

}  // namespace lathe::detail
