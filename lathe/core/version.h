// The version of the Lathe library a program runs against (base/version.h has the numbers and
// the macros of the headers it was compiled with; the two differ only when a program is linked
// against another build than its headers').
#pragma once

#include "lathe/base/version.h"

namespace lathe {

struct Version {
  int major = 0;
  int minor = 0;
  int patch = 0;
};

// "0.1.0": the library's version, as LATHE_VERSION_STRING was when it was built.
const char* version();
// The same as numbers.
Version version_numbers();

}  // namespace lathe
