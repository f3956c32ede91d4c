#include "lathe/ops/register.h"

namespace lathe::detail {

void register_copy_ops(OpRegistry& r) {}

}  // namespace lathe::detail
