// The one source of the shared library liblathe.so (BUILD_SHARED_LIBS=ON): its code is the layers'
// static archives, linked whole (CMakeLists.txt); a shared library target needs a source of its own.
#include "lathe/core/version.h"
