// Attrs: the non-tensor arguments of an op call (ints, floats, int lists, strings, dtypes),
// kept as an ordered list of named values so tracing can record and hash them.
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
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

namespace detail {
// The shared, reference-counted list behind Attrs: a header with `capacity` items after it, in
// one allocation. Items are never changed while more than one Attrs refers to the block.
struct alignas(16) AttrsBlock {
  std::atomic<uint32_t> refs{1};
  uint32_t size = 0;
  uint32_t capacity = 0;
  std::pair<const char*, AttrValue>* items() {
    return reinterpret_cast<std::pair<const char*, AttrValue>*>(this + 1);
  }
};
void release_attrs_block(AttrsBlock* b) noexcept;  // destroys the items and frees the block
}  // namespace detail

// The attributes of one op call. Copies share the list of items (a reference count, no copy of
// any value): the lazy device and graph nodes keep a copy of each call's attributes, and copying
// them costs one counter increment. set() copies the list first when it is shared, so a copy
// never sees another's changes.
class Attrs {
 public:
  using Item = std::pair<const char*, AttrValue>;

  Attrs() = default;
  Attrs(std::initializer_list<Item> items);
  Attrs(const Attrs& o) noexcept : block_(o.block_), parsed_(o.parsed_) {
    if (block_) block_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  Attrs(Attrs&& o) noexcept
      : block_(std::exchange(o.block_, nullptr)), parsed_(std::move(o.parsed_)) {}
  Attrs& operator=(const Attrs& o) noexcept {
    Attrs(o).swap(*this);
    return *this;
  }
  Attrs& operator=(Attrs&& o) noexcept {
    Attrs(std::move(o)).swap(*this);
    return *this;
  }
  ~Attrs() { release(); }
  void swap(Attrs& o) noexcept {
    std::swap(block_, o.block_);
    parsed_.swap(o.parsed_);
  }

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

  // The items in the order they were set (a view, valid until this Attrs changes).
  std::span<const Item> items() const {
    return block_ ? std::span<const Item>(block_->items(), block_->size) : std::span<const Item>();
  }
  // True when this and `o` share one list of items (copies do until either is set()).
  bool shares_items_with(const Attrs& o) const { return block_ != nullptr && block_ == o.block_; }
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
  void release() noexcept {
    // The last owner needs no atomic decrement: nobody else can be copying the block.
    if (block_ && (block_->refs.load(std::memory_order_acquire) == 1 ||
                   block_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1))
      detail::release_attrs_block(block_);
    block_ = nullptr;
  }
  detail::AttrsBlock* block_ = nullptr;
  std::shared_ptr<const ParsedAttrs> parsed_;
};

}  // namespace lathe
