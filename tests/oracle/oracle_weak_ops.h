// Weak redeclarations of ops.h free functions that are declared but not defined yet, so that
// the oracle tests link: such an op has a null address, which the tests report as a failure
// ("not linked") instead of breaking the build of the whole test folder. Only ops missing from
// the library belong here: a weak reference does not pull an object file out of the static
// library, so an op defined in a file nothing else references (attention_ops.cpp) would read
// as missing. Remove an entry once the op is defined.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lathe/ops/ops.h"

#define LATHE_ORACLE_WEAK __attribute__((weak))

namespace lathe {

// Declared in ops.h but not defined in the library yet: none today.

}  // namespace lathe

namespace lathe::oracle {

// True when the function F (an ops.h overload picked by its pointer type) is linked in:
// linked<Tensor (*)(const Tensor&)>(&lathe::relu).
template <class F>
bool linked(F f) {
  return f != nullptr;
}

}  // namespace lathe::oracle
