#include "lathe/trace/partition.h"

#include "lathe/ir/passes.h"
#include "lathe/trace/compile_options.h"

namespace lathe {
namespace {

bool recomputable(const ir::Value* v, const std::unordered_set<const ir::Value*>& needed) {
  const ir::Node* p = v->producer();
  if (!p) return false;
  const OpCategory c = p->op().category;
  if ((c != OpCategory::pointwise && c != OpCategory::view) || p->has_side_effects() ||
      ir::is_random_op(p->op()))
    return false;
  for (const ir::Value* in : p->inputs())
    if (in && !in->is_input() && !needed.count(in)) return false;
  return true;
}

}  // namespace

detail::Partition DefaultPartitioner::partition(detail::JointGraph& joint) const {
  const std::unordered_set<const ir::Value*> needed(joint.needed.begin(), joint.needed.end());
  std::unordered_set<const ir::Value*> recomputed;
  std::vector<ir::Value*> saved;
  for (const ir::Value* v : joint.needed) {
    if (v->is_input()) continue;
    if (recomputable(v, needed))
      recomputed.insert(v);
    else
      saved.push_back(const_cast<ir::Value*>(v));
  }
  return joint.split(std::move(saved), recomputed);
}

const Partitioner& partitioner_of(const CompileOptions& options) {
  static const DefaultPartitioner fallback;
  return options.partitioner ? *options.partitioner : fallback;
}

}  // namespace lathe
