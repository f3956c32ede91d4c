#include "lathe/ops/attrs.h"

#include <cstring>
#include <sstream>

namespace lathe {

Attrs& Attrs::set(const char* name, AttrValue v) {
  parsed_ = nullptr;
  for (auto& [k, val] : items_) {
    if (std::strcmp(k, name) == 0) {
      val = std::move(v);
      return *this;
    }
  }
  items_.emplace_back(name, std::move(v));
  return *this;
}

const AttrValue* Attrs::find(const char* name) const {
  for (const auto& [k, v] : items_)
    if (std::strcmp(k, name) == 0) return &v;
  return nullptr;
}

double Attrs::get_double(const char* name) const {
  const AttrValue* v = find(name);
  LATHE_CHECK(v != nullptr, "[attrs] missing attribute '", name, "'");
  if (auto* d = std::get_if<double>(v)) return *d;
  if (auto* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
  throw Error(detail::str("[attrs] attribute '", name, "' is not a number"));
}

std::string Attrs::to_string() const {
  std::ostringstream os;
  bool first = true;
  for (const auto& [k, v] : items_) {
    os << (first ? "" : ", ") << k << '=';
    first = false;
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, bool>)
            os << (x ? "true" : "false");
          else if constexpr (std::is_same_v<T, Shape>)
            os << detail::str(x);
          else if constexpr (std::is_same_v<T, std::string>)
            os << '"' << x << '"';
          else
            os << x;
        },
        v);
  }
  return os.str();
}

}  // namespace lathe
