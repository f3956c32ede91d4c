#pragma once
// Source: where a size comes from in a compiled call's inputs, e.g. arg0.size(1).

#include <cstdint>
#include <string>

namespace lathe::sym {

// A source names one integer of the call's inputs: a tensor's size or stride along a dim, or a
// plain int64 scalar argument. `arg` indexes the call's input slots (see ArgView in
// guard_program.h); tensors captured from modules get slots after the arguments and a name, which
// is what prints ("layer1.0.conv1.weight.size(0)" instead of "arg3.size(0)").
class Source {
 public:
  enum class Kind : uint8_t { kSize, kStride, kScalar };

  static Source size(int32_t arg, int32_t dim, std::string name = {}) {
    return Source(Kind::kSize, arg, dim, std::move(name));
  }
  static Source stride(int32_t arg, int32_t dim, std::string name = {}) {
    return Source(Kind::kStride, arg, dim, std::move(name));
  }
  static Source scalar(int32_t arg, std::string name = {}) {
    return Source(Kind::kScalar, arg, 0, std::move(name));
  }

  Kind kind() const { return kind_; }
  int32_t arg() const { return arg_; }
  int32_t dim() const { return dim_; }
  const std::string& name() const { return name_; }

  // "arg0.size(1)", "arg2.stride(0)", "arg3", "layer1.0.conv1.weight.size(0)".
  std::string to_string() const {
    std::string base = name_.empty() ? "arg" + std::to_string(arg_) : name_;
    switch (kind_) {
      case Kind::kSize:
        return base + ".size(" + std::to_string(dim_) + ")";
      case Kind::kStride:
        return base + ".stride(" + std::to_string(dim_) + ")";
      case Kind::kScalar:
        return base;
    }
    return base;
  }

  // Identity is the slot read (kind, arg, dim); the name only prints.
  bool operator==(const Source& o) const {
    return kind_ == o.kind_ && arg_ == o.arg_ && dim_ == o.dim_;
  }
  // A key unique per slot read, for maps.
  uint64_t key() const {
    return (static_cast<uint64_t>(kind_) << 62) | (static_cast<uint64_t>(uint32_t(arg_)) << 30) |
           static_cast<uint64_t>(uint32_t(dim_) & 0x3fffffff);
  }

 private:
  Source(Kind kind, int32_t arg, int32_t dim, std::string name)
      : kind_(kind), arg_(arg), dim_(dim), name_(std::move(name)) {}
  Kind kind_;
  int32_t arg_;
  int32_t dim_;
  std::string name_;
};

}  // namespace lathe::sym
