#include "lathe/backend/cpu/constant_fold.h"

#include <variant>

#include "lathe/ops/register.h"

namespace lathe::backend::cpu {
namespace {

bool has_symbolic_attrs(const ir::Node& n) {
  for (const auto& [name, value] : n.attrs().items()) {
    const Shape* shape = std::get_if<Shape>(&value);
    if (!shape) continue;
    for (const SymInt& s : *shape)
      if (!s.maybe_int()) return true;
  }
  return false;
}

}  // namespace

std::unique_ptr<ir::Graph> constant_fold(const ir::Graph& g, GraphConstants& constants,
                                         int* folded) {
  std::unordered_map<const ir::Value*, Tensor> value = constant_values(g, constants);
  GraphConstants out_constants = constants;
  int count = 0;
  auto out = rewrite_graph(g, [&](const ir::Node& n, GraphCopy& copy) {
    if (n.op().category == OpCategory::random || n.has_side_effects() || has_symbolic_attrs(n))
      return false;
    std::vector<Tensor> args;
    bool any = false;
    for (const ir::Value* v : n.inputs()) {
      if (!v) {
        args.emplace_back();
        continue;
      }
      auto it = value.find(v);
      if (it == value.end()) return false;
      args.push_back(it->second);
      any = true;
    }
    if (!any) return false;
    std::vector<TensorMeta> metas = n.op().shape(args, n.attrs());
    std::vector<Tensor> results = run_eager_kernel(n.op(), args, n.attrs(), metas);
    LATHE_CHECK(results.size() == n.outputs().size(), "[constant_fold] ", n.name(), " (",
                n.op().name, ") returned ", results.size(), " outputs, the node has ",
                n.outputs().size());
    for (size_t i = 0; i < results.size(); ++i) {
      const ir::Value* o = n.output(i);
      value.emplace(o, results[i]);
      copy.map[o] = add_constant(copy, out_constants, results[i], o->type(),
                                 lathe::detail::str("fold(%", o->id(), " ", n.op().name, ")"));
    }
    ++count;
    return true;
  });
  out_constants.resize(out->inputs().size());
  constants = std::move(out_constants);
  if (folded) *folded = count;
  return out;
}

}  // namespace lathe::backend::cpu
