#include "lathe/ops/attrs.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <sstream>

namespace lathe {

namespace detail {
namespace {

using Item = Attrs::Item;

// A block with room for `capacity` items, holding none yet.
AttrsBlock* new_attrs_block(size_t capacity) {
  static_assert(sizeof(AttrsBlock) % alignof(Item) == 0);
  void* mem = ::operator new(sizeof(AttrsBlock) + capacity * sizeof(Item));
  auto* b = new (mem) AttrsBlock();
  b->capacity = static_cast<uint32_t>(capacity);
  return b;
}

void destroy_items(AttrsBlock* b) noexcept {
  for (uint32_t i = 0; i < b->size; ++i) b->items()[i].~Item();
  b->size = 0;
}

void free_attrs_block(AttrsBlock* b) noexcept {
  b->~AttrsBlock();
  ::operator delete(b);
}

// A block of `capacity` holding copies (copy) or the moved items (unique owner) of `from`.
AttrsBlock* regrow(AttrsBlock* from, size_t capacity, bool move) {
  AttrsBlock* b = new_attrs_block(capacity);
  try {
    for (uint32_t i = 0; i < from->size; ++i) {
      if (move)
        new (b->items() + i) Item(std::move(from->items()[i]));
      else
        new (b->items() + i) Item(from->items()[i]);
      b->size = i + 1;
    }
  } catch (...) {
    destroy_items(b);
    free_attrs_block(b);
    throw;
  }
  return b;
}

}  // namespace

void release_attrs_block(AttrsBlock* b) noexcept {
  destroy_items(b);
  free_attrs_block(b);
}

}  // namespace detail

Attrs::Attrs(std::initializer_list<Item> items) {
  if (items.size() == 0) return;
  detail::AttrsBlock* b = detail::new_attrs_block(items.size());
  try {
    for (const Item& it : items) {
      new (b->items() + b->size) Item(it);
      b->size++;
    }
  } catch (...) {
    detail::release_attrs_block(b);
    throw;
  }
  block_ = b;
}

Attrs& Attrs::set(const char* name, AttrValue v) {
  parsed_ = nullptr;
  const bool shared = block_ && block_->refs.load(std::memory_order_acquire) != 1;
  if (block_ && !shared) {
    for (Item& it : std::span<Item>(block_->items(), block_->size)) {
      if (std::strcmp(it.first, name) == 0) {
        it.second = std::move(v);
        return *this;
      }
    }
  }
  // Copy on write: a shared list is copied (with room for one more) before it changes.
  const uint32_t size = block_ ? block_->size : 0;
  if (!block_ || shared || size == block_->capacity) {
    detail::AttrsBlock* grown =
        block_ ? detail::regrow(block_, std::max<size_t>(2 * size, size + 1), !shared)
               : detail::new_attrs_block(2);
    release();
    block_ = grown;
    if (shared) {
      for (Item& it : std::span<Item>(block_->items(), block_->size)) {
        if (std::strcmp(it.first, name) == 0) {
          it.second = std::move(v);
          return *this;
        }
      }
    }
  }
  new (block_->items() + block_->size) Item(name, std::move(v));
  block_->size++;
  return *this;
}

const AttrValue* Attrs::find(const char* name) const {
  for (const auto& [k, v] : items())
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
  for (const auto& [k, v] : items()) {
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
