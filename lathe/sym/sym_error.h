#pragma once
// Errors raised by the symbolic-shape layer. lathe_sym depends on nothing else in the project, so
// it has its own root error type; it will derive from lathe::Error once that moves below sym.

#include <stdexcept>
#include <string>

namespace lathe::sym {

// Any error of the symbolic layer: bad arithmetic (division by zero, int64 overflow), misuse of
// the API. Messages start with the component in brackets, e.g. "[sym] division by zero: ...".
class SymError : public std::runtime_error {
 public:
  explicit SymError(const std::string& what) : std::runtime_error(what) {}
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
