#pragma once
// Errors raised by the symbolic-shape layer. They are lathe::Errors (lathe/base, header-only), so
// one catch handles every Lathe error.

#include <string>

#include "lathe/base/error.h"

namespace lathe::sym {

// Any error of the symbolic layer: bad arithmetic (division by zero, int64 overflow), misuse of
// the API. Messages start with the component in brackets, e.g. "[sym] division by zero: ...".
class SymError : public ::lathe::Error {
 public:
  explicit SymError(const std::string& what) : ::lathe::Error(what) {}
};

// Tracing specialized or narrowed a dimension the user declared dynamic with mark_dynamic().
class ConstraintViolation : public SymError {
 public:
  explicit ConstraintViolation(const std::string& what) : SymError(what) {}
};

// A branch was taken on a data-dependent (unbacked) size that has no hint to decide it.
class DataDependentError : public SymError {
 public:
  explicit DataDependentError(const std::string& what) : SymError(what) {}
};

}  // namespace lathe::sym
