// InlineVector: a fixed-after-assignment sequence that keeps up to N elements inside its owner
// and more on the heap. A recorded op's node keeps its input values and output sizes in these,
// so recording an op does not allocate for them (nearly every op has at most five inputs and
// outputs of at most five dims).
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

namespace lathe::lazy {

template <class T, size_t N>
class InlineVector {
 public:
  InlineVector() {}
  InlineVector(const InlineVector&) = delete;
  InlineVector& operator=(const InlineVector&) = delete;

  // Moves the elements of `values` in (they are left moved-from).
  void assign_moved(std::span<T> values) {
    T* dst = reserve(values.size());
    for (size_t i = 0; i < size_; ++i) dst[i] = std::move(values[i]);
  }
  // Copies the elements of `values` in.
  void assign(std::span<const T> values) {
    T* dst = reserve(values.size());
    for (size_t i = 0; i < size_; ++i) dst[i] = values[i];
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T* begin() const { return size_ > N ? heap_.data() : inline_; }
  const T* end() const { return begin() + size_; }
  const T& operator[](size_t i) const { return begin()[i]; }

 private:
  // Where `n` elements go (the previous contents are dropped).
  T* reserve(size_t n) {
    if (size_ != 0) {
      for (size_t i = 0; i < N && i < size_; ++i) inline_[i] = T();
      heap_.clear();
    }
    size_ = n;
    if (n <= N) return inline_;
    heap_.resize(n);
    return heap_.data();
  }

  T inline_[N]{};
  std::vector<T> heap_;
  size_t size_ = 0;
};

}  // namespace lathe::lazy
