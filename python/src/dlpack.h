// Zero-copy exchange with other array libraries through DLPack (https://dmlc.github.io/dlpack/):
// export as the versioned capsule when the consumer asks for DLPack >= 1.0 (numpy then sees
// writable memory), else the unversioned one; import through the unversioned capsule, which torch
// and numpy both produce when __dlpack__() is called without arguments.
#pragma once

#include <nanobind/nanobind.h>

#include "lathe/core/tensor.h"

namespace lathe::python {

// A capsule viewing t's memory; the capsule (or its consumer) keeps t's storage alive.
nanobind::object to_dlpack_capsule(const Tensor& t, bool versioned);
// A tensor viewing the memory of any object with __dlpack__ (a CPU tensor or array); it keeps
// the producer's buffer alive until the last view of it is gone. Throws lathe::Error for a
// non-CPU device or a dtype Lathe does not have.
Tensor from_dlpack_object(nanobind::handle obj);

}  // namespace lathe::python
