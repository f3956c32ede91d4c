// Lathe's version: the one source of it. CMake's project(VERSION) and pyproject.toml's version
// read the three numbers below; lathe::version() (core/version.h) is the version of the library a
// program runs against, these macros the version of the headers it was compiled with.
#pragma once

#define LATHE_VERSION_MAJOR 0
#define LATHE_VERSION_MINOR 1
#define LATHE_VERSION_PATCH 0

#define LATHE_VERSION_STR_(x) #x
#define LATHE_VERSION_STR(x) LATHE_VERSION_STR_(x)
// "0.1.0"
#define LATHE_VERSION_STRING                                                   \
  LATHE_VERSION_STR(LATHE_VERSION_MAJOR) "." LATHE_VERSION_STR(LATHE_VERSION_MINOR) "." \
      LATHE_VERSION_STR(LATHE_VERSION_PATCH)
// A number to compare: LATHE_VERSION >= LATHE_VERSION_AT(0, 1, 0).
#define LATHE_VERSION_AT(major, minor, patch) ((major) * 10000 + (minor) * 100 + (patch))
#define LATHE_VERSION LATHE_VERSION_AT(LATHE_VERSION_MAJOR, LATHE_VERSION_MINOR, LATHE_VERSION_PATCH)
