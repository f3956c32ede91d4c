// Symbolic attributes of a compiled step: the elements of its Shape attributes that are
// expressions of the graph's size symbols (a view's target size under dynamic shapes), found
// once at compile time and evaluated per call. Shared by the interpreter and the cpu executor.
#pragma once

#include <cstddef>
#include <vector>

#include "lathe/backend/backend.h"
#include "lathe/ops/attrs.h"

namespace lathe::sym {
class Expr;
}

namespace lathe::backend {

// attrs.items()[item] is a Shape whose element `element` is `expr`.
struct SymbolicAttr {
  size_t item;
  size_t element;
  const sym::Expr* expr;
};

// The symbolic elements of attrs' Shape attributes, by item then element (empty for most nodes:
// their attributes are used as they are).
std::vector<SymbolicAttr> find_symbolic_attrs(const Attrs& attrs);

// attrs with each of `symbolic` (found in attrs by find_symbolic_attrs) replaced by its value
// for this call.
Attrs substitute_symbols(const Attrs& attrs, const std::vector<SymbolicAttr>& symbolic,
                         SymbolValues symbols);

}  // namespace lathe::backend
