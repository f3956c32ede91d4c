// lathe::Error lives in the header-only base layer (below sym, which throws it too); core
// re-exports it so code above includes it from core.
#pragma once

#include "lathe/base/error.h"  // IWYU pragma: export
