#include "lathe/core/version.h"

namespace lathe {

const char* version() { return LATHE_VERSION_STRING; }

Version version_numbers() {
  return Version{LATHE_VERSION_MAJOR, LATHE_VERSION_MINOR, LATHE_VERSION_PATCH};
}

}  // namespace lathe
