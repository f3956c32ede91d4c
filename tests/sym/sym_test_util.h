#pragma once
// Helpers shared by the symbolic-shape tests.

#include <string>

#include "lathe/sym/sym_error.h"

namespace lathe::sym::testing {

// The message of the SymError f throws, or "<no error>".
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const SymError& e) {
    return e.what();
  }
  return "<no error>";
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace lathe::sym::testing
