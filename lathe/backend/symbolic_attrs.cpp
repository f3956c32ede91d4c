#include "lathe/backend/symbolic_attrs.h"

#include <variant>

#include "lathe/sym/expr.h"

namespace lathe::backend {

std::vector<SymbolicAttr> find_symbolic_attrs(const Attrs& attrs) {
  std::vector<SymbolicAttr> out;
  for (size_t i = 0; i < attrs.items().size(); ++i) {
    const Shape* shape = std::get_if<Shape>(&attrs.items()[i].second);
    if (!shape) continue;
    for (size_t j = 0; j < shape->size(); ++j)
      if (const sym::Expr* e = (*shape)[j].expr()) out.push_back({i, j, e});
  }
  return out;
}

Attrs substitute_symbols(const Attrs& attrs, const std::vector<SymbolicAttr>& symbolic,
                         SymbolValues symbols) {
  Attrs out = attrs;
  size_t k = 0;
  while (k < symbolic.size()) {
    const size_t item = symbolic[k].item;
    const auto& [name, value] = attrs.items()[item];
    Shape shape = std::get<Shape>(value);
    for (; k < symbolic.size() && symbolic[k].item == item; ++k)
      shape[symbolic[k].element] = sym::evaluate(symbolic[k].expr, symbols);
    out.set(name, std::move(shape));
  }
  return out;
}

}  // namespace lathe::backend
