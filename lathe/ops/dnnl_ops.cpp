#include "lathe/ops/register.h"

namespace lathe::detail {

void register_dnnl_ops(OpRegistry& r) {}

}  // namespace lathe::detail
