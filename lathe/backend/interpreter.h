// The interpreter backend ("interpreter"): runs a graph node by node with the eager kernels,
// releasing each intermediate at its last use. The reference every other backend is tested against.
#pragma once

#include <memory>

#include "lathe/backend/backend.h"

namespace lathe::backend {

std::unique_ptr<Backend> make_interpreter_backend();

}  // namespace lathe::backend
