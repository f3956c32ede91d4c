// KernelTable: what one backend knows about running each op, keyed by the op.
//
// An OpDef says what an op is (lathe/ops/op_def.h); how a backend runs it (its kernel writing
// into preplanned outputs, the fused forms its passes may build) is the backend's own table. A
// backend fills its table once, before its first compile, and reads it without locks after
// that; lathe/ops never names a backend's table, so a new backend adds a table and no field to
// OpDef (tests/backend/test_toy_backend.cpp builds one).
#pragma once

#include <unordered_map>

#include "lathe/ops/op_def.h"

namespace lathe::backend {

template <class Info>
class KernelTable {
 public:
  // The entry of `op`, created empty on first use (registration code only).
  Info& entry(const OpDef& op) { return entries_[&op]; }
  // The entry of `op`, or null when the backend has none.
  const Info* find(const OpDef* op) const {
    auto it = entries_.find(op);
    return it == entries_.end() ? nullptr : &it->second;
  }
  size_t size() const { return entries_.size(); }

 private:
  std::unordered_map<const OpDef*, Info> entries_;
};

}  // namespace lathe::backend
