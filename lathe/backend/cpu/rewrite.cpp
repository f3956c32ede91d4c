#include "lathe/backend/cpu/rewrite.h"

namespace lathe::backend::cpu {

void GraphCopy::copy_node(const ir::Node& n) {
  std::vector<ir::Value*> inputs;
  inputs.reserve(n.inputs().size());
  for (const ir::Value* v : n.inputs()) inputs.push_back((*this)[v]);
  std::vector<ir::ValueType> types;
  for (const ir::Value* v : n.outputs()) types.push_back(v->type());
  ir::Node* copy = graph->add_node(n.op(), std::move(inputs), n.attrs(), std::move(types));
  for (size_t i = 0; i < n.outputs().size(); ++i) map[n.output(i)] = copy->output(i);
}

std::unique_ptr<ir::Graph> rewrite_graph(
    const ir::Graph& g, const std::function<bool(const ir::Node&, GraphCopy&)>& emit) {
  GraphCopy c;
  for (size_t i = 0; i < g.inputs().size(); ++i)
    c.map[g.inputs()[i]] = c.graph->add_input(g.inputs()[i]->type(), g.input_sources()[i]);
  for (const ir::Node* n : g.nodes())
    if (!emit(*n, c)) c.copy_node(*n);
  std::vector<ir::Value*> outs;
  for (const ir::Value* v : g.outputs()) outs.push_back(c[v]);
  c.graph->set_outputs(std::move(outs));
  return std::move(c.graph);
}

std::unordered_map<const ir::Value*, Tensor> constant_values(const ir::Graph& g,
                                                             const GraphConstants& constants) {
  std::unordered_map<const ir::Value*, Tensor> out;
  for (size_t i = 0; i < g.inputs().size() && i < constants.size(); ++i)
    if (constants[i].defined()) out.emplace(g.inputs()[i], constants[i]);
  return out;
}

ir::Value* add_constant(GraphCopy& copy, GraphConstants& constants, const Tensor& value,
                        const ir::ValueType& type, const std::string& name) {
  const size_t pos = copy.graph->inputs().size();
  constants.resize(pos);
  constants.push_back(value);
  ir::InputSource source;
  source.kind = ir::InputSource::Kind::captured;
  source.index = static_cast<int>(pos);
  source.name = name;
  return copy.graph->add_input(type, std::move(source));
}

}  // namespace lathe::backend::cpu
