// SymInt: the element type of sizes and strides. For now a plain int64 wrapper; the symbolic
// version (lathe/sym) replaces it without changing the ops that use it.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

namespace lathe {

class SymInt {
 public:
  constexpr SymInt() = default;
  constexpr SymInt(int64_t v) : v_(v) {}  // NOLINT: implicit from int by design

  // The concrete value; throws once SymInt can be symbolic and this one is.
  constexpr int64_t expect_int() const { return v_; }
  constexpr bool is_symbolic() const { return false; }

  friend constexpr SymInt operator+(SymInt a, SymInt b) { return a.v_ + b.v_; }
  friend constexpr SymInt operator-(SymInt a, SymInt b) { return a.v_ - b.v_; }
  friend constexpr SymInt operator*(SymInt a, SymInt b) { return a.v_ * b.v_; }
  friend constexpr SymInt operator-(SymInt a) { return -a.v_; }
  friend constexpr bool operator==(SymInt a, SymInt b) { return a.v_ == b.v_; }
  friend constexpr bool operator!=(SymInt a, SymInt b) { return a.v_ != b.v_; }
  friend constexpr bool operator<(SymInt a, SymInt b) { return a.v_ < b.v_; }
  friend constexpr bool operator<=(SymInt a, SymInt b) { return a.v_ <= b.v_; }
  friend constexpr bool operator>(SymInt a, SymInt b) { return a.v_ > b.v_; }
  friend constexpr bool operator>=(SymInt a, SymInt b) { return a.v_ >= b.v_; }
  SymInt& operator+=(SymInt o) {
    v_ += o.v_;
    return *this;
  }
  SymInt& operator*=(SymInt o) {
    v_ *= o.v_;
    return *this;
  }
  friend std::ostream& operator<<(std::ostream& os, SymInt s) { return os << s.v_; }

 private:
  int64_t v_ = 0;
};

// Python floor division and modulo on sizes.
constexpr SymInt floor_div(SymInt a, SymInt b) {
  int64_t x = a.expect_int(), y = b.expect_int();
  int64_t q = x / y;
  return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
}
constexpr SymInt ceil_div(SymInt a, SymInt b) { return -floor_div(-a, b); }
constexpr SymInt sym_min(SymInt a, SymInt b) { return a < b ? a : b; }
constexpr SymInt sym_max(SymInt a, SymInt b) { return a < b ? b : a; }

using Shape = std::vector<SymInt>;

// Concrete sizes of a shape (every element must be concrete).
std::vector<int64_t> to_ints(const Shape& s);
Shape to_shape(const std::vector<int64_t>& v);
// Product of the sizes.
SymInt shape_numel(const Shape& s);

}  // namespace lathe
