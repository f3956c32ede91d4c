// Attrs: the non-tensor arguments of an op call (ints, floats, int lists, strings, dtypes),
// kept as an ordered list of named values so tracing can record and hash them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "lathe/core/dtype.h"
#include "lathe/core/error.h"
#include "lathe/core/sym_int.h"

namespace lathe {

using AttrValue = std::variant<bool, int64_t, double, Shape, std::string, DType>;

// The typed form of one op's attributes (conv2d's stride, padding, dilation and groups as ints),
// parsed once by the op (OpDef::parse_attrs) where a call's attributes stop changing: a graph
// node, an executor step. The op's rule and kernel read its fields instead of searching names and
// converting lists on every call; attributes without it (an eager call) are read by name.
struct ParsedAttrs {
  virtual ~ParsedAttrs() = default;
};

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<const char*, AttrValue>> items) : items_(items) {}

  Attrs& set(const char* name, AttrValue v);
  bool has(const char* name) const { return find(name) != nullptr; }
  bool get_bool(const char* name) const { return get<bool>(name); }
  int64_t get_int(const char* name) const { return get<int64_t>(name); }
  double get_double(const char* name) const;  // accepts an int too
  const Shape& get_shape(const char* name) const { return get<Shape>(name); }
  std::vector<int64_t> get_ints(const char* name) const { return to_ints(get<Shape>(name)); }
  const std::string& get_string(const char* name) const { return get<std::string>(name); }
  DType get_dtype(const char* name) const { return get<DType>(name); }

  // The parsed form attached with set_parsed, when it is a T (else null: read by name).
  template <class T>
  const T* parsed() const {
    return parsed_ ? dynamic_cast<const T*>(parsed_.get()) : nullptr;
  }
  bool has_parsed() const { return parsed_ != nullptr; }
  // Copies of these attributes share it; set() drops it.
  void set_parsed(std::shared_ptr<const ParsedAttrs> p) { parsed_ = std::move(p); }

  const std::vector<std::pair<const char*, AttrValue>>& items() const { return items_; }
  // "stride=[2,2], padding=[3,3]" for printing graphs and errors.
  std::string to_string() const;

 private:
  const AttrValue* find(const char* name) const;
  template <class T>
  const T& get(const char* name) const {
    const AttrValue* v = find(name);
    LATHE_CHECK(v != nullptr, "[attrs] missing attribute '", name, "'");
    const T* p = std::get_if<T>(v);
    LATHE_CHECK(p != nullptr, "[attrs] attribute '", name, "' has the wrong type");
    return *p;
  }
  std::vector<std::pair<const char*, AttrValue>> items_;
  std::shared_ptr<const ParsedAttrs> parsed_;
};

}  // namespace lathe
