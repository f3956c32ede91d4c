// The Python interpreter that runs the PyTorch generators of the oracle tests, and what a test
// does when it is missing: skip on a developer machine, fail under CI (env CI set), so a CI run
// can never pass with the PyTorch comparisons silently skipped.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace lathe::oracle {

// LATHE_PYTHON from the environment, else the interpreter CMake configured (the LATHE_PYTHON
// cache variable, by default <source dir>/.venv/bin/python of this checkout).
inline std::string python_path() {
  if (const char* p = std::getenv("LATHE_PYTHON"); p && *p) return p;
#ifdef LATHE_PYTHON_DEFAULT
  return LATHE_PYTHON_DEFAULT;
#else
  return std::string(LATHE_SOURCE_DIR) + "/.venv/bin/python";
#endif
}

// True when the environment variable CI is set to anything but "", "0" or "false" (GitHub
// Actions, GitLab and most CI systems set CI=true; .ci/run sets CI=1).
inline bool running_in_ci() {
  const char* ci = std::getenv("CI");
  if (ci == nullptr) return false;
  const std::string v = ci;
  return !v.empty() && v != "0" && v != "false";
}

// Empty when the interpreter exists; else why the oracle cannot run.
inline std::string python_missing_reason() {
  const std::string py = python_path();
  std::error_code ec;
  if (std::filesystem::exists(py, ec)) return "";
  return "no Python interpreter at " + py +
         " to run the PyTorch oracle (create the venv with scripts/setup.sh, or set LATHE_PYTHON)";
}

}  // namespace lathe::oracle

// Ends the current test when the oracle's interpreter is missing: a failure under CI, a skip
// with the reason elsewhere. Use at the top of a TEST body.
#define LATHE_REQUIRE_ORACLE_PYTHON()                                                        \
  do {                                                                                       \
    const std::string lathe_why_ = ::lathe::oracle::python_missing_reason();                 \
    if (!lathe_why_.empty()) {                                                               \
      if (::lathe::oracle::running_in_ci()) FAIL() << lathe_why_ << " (CI is set: failing)"; \
      GTEST_SKIP() << lathe_why_;                                                            \
    }                                                                                        \
  } while (0)
