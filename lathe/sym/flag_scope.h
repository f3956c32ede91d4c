// FlagScope: sets a flag for a scope and restores it when leaving (the ShapeEnv's modes).
#pragma once

namespace lathe::sym {

class FlagScope {
 public:
  FlagScope(bool& flag, bool value) : flag_(flag), old_(flag) { flag_ = value; }
  ~FlagScope() { flag_ = old_; }
  FlagScope(const FlagScope&) = delete;
  FlagScope& operator=(const FlagScope&) = delete;

 private:
  bool& flag_;
  bool old_;
};

}  // namespace lathe::sym
