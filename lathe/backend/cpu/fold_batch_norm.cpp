#include "lathe/backend/cpu/fold_batch_norm.h"

#include <cmath>
#include <unordered_set>

#include "lathe/backend/cpu/match.h"
#include "lathe/core/threads.h"
#include "lathe/ops/ops.h"

namespace lathe::backend::cpu {
namespace {

struct Fold {
  const ir::Node* conv;
  Tensor weight, bias;  // folded
};

std::vector<double> as_f64(const Tensor& t, int64_t n, double dflt) {
  if (!t.defined()) return std::vector<double>(n, dflt);
  return t.to(DType::f64).contiguous().to_vector<double>();
}

// w (f32 or f64, [O, ...]) with row o multiplied by scale[o], contiguous. Each product is taken
// in f64 and rounded once to T. One pass over fresh memory on every thread: the weights of a
// resnet50 are 100 MB, and this runs at every compile.
template <class T>
Tensor scaled_rows(const Tensor& w, const std::vector<double>& scale) {
  const Tensor src = w.contiguous();
  Tensor out = empty(w.sizes(), w.dtype());
  const T* sp = src.data<T>();
  T* dp = out.data<T>();
  const int64_t O = static_cast<int64_t>(scale.size());
  const int64_t per = w.numel() / std::max<int64_t>(O, 1);
  const int threads = w.numel() >= (int64_t{1} << 16) ? lathe::num_threads() : 1;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t o = 0; o < O; ++o)
    for (int64_t k = 0; k < per; ++k)
      dp[o * per + k] = static_cast<T>(static_cast<double>(sp[o * per + k]) * scale[o]);
  return out;
}

// ts: conv weight, conv bias, mean, var, gamma, beta (bias, gamma, beta may be undefined).
std::pair<Tensor, Tensor> fold(const Tensor* ts, double eps) {
  const Tensor& w = ts[0];
  const int64_t O = w.size(0).expect_int();
  std::vector<double> b = as_f64(ts[1], O, 0), mean = as_f64(ts[2], O, 0),
                      var = as_f64(ts[3], O, 1), gamma = as_f64(ts[4], O, 1),
                      beta = as_f64(ts[5], O, 0);
  std::vector<double> scale(O), shift(O);
  for (int64_t o = 0; o < O; ++o) {
    scale[o] = gamma[o] / std::sqrt(var[o] + eps);
    shift[o] = (b[o] - mean[o]) * scale[o] + beta[o];
  }
  Tensor wf =
      w.dtype() == DType::f32 ? scaled_rows<float>(w, scale) : scaled_rows<double>(w, scale);
  return {wf, from_vector(shift, {O}).to(w.dtype())};
}

// How the graph prints input v ("layer1.0.conv1.weight", "arg2", ...).
std::string input_name(const ir::Graph& g, const ir::Value* v) {
  for (size_t i = 0; i < g.inputs().size(); ++i)
    if (g.inputs()[i] == v) return g.input_sources()[i].to_string();
  return lathe::detail::str("%", v->id());
}

}  // namespace

std::unique_ptr<ir::Graph> fold_batch_norm(const ir::Graph& g, GraphConstants& constants,
                                           int* folded) {
  std::unordered_map<const ir::Value*, Tensor> value = constant_values(g, constants);
  auto is_const = [&](const ir::Value* v, bool optional) {
    return v ? value.count(v) != 0 : optional;
  };
  auto get = [&](const ir::Value* v) { return v ? value.at(v) : Tensor(); };
  std::unordered_set<const ir::Value*> outs(g.outputs().begin(), g.outputs().end());
  // Folds by batch norm node; the conv nodes they absorb.
  std::unordered_map<const ir::Node*, Fold> by_bn;
  std::unordered_set<const ir::Node*> absorbed;
  for (const ir::Node* conv : g.nodes()) {
    if (!is_op(conv, cpu_ops().conv2d)) continue;
    const ir::Value* y = conv->output();
    if (y->users().size() != 1 || outs.count(y)) continue;
    const ir::Node* bn = y->users()[0];
    if (!is_op(bn, cpu_ops().batch_norm) || bn->inputs()[0] != y || bn->attrs().get_bool("training"))
      continue;
    const auto& ci = conv->inputs();
    const auto& bi = bn->inputs();
    if (!is_const(ci[1], false) || !is_const(ci[2], true) || !is_const(bi[1], false) ||
        !is_const(bi[2], false) || !is_const(bi[3], true) || !is_const(bi[4], true))
      continue;
    // The folded conv stands for the batch norm's value: it must have the same type (strides
    // of size-1 dims can differ between the two rules).
    const ir::ValueType &ct = y->type(), &bt = bn->output()->type();
    if (!same_sizes(ct.sizes, bt.sizes) ||
        (!bt.strides.empty() && !same_sizes(ct.strides, bt.strides)))
      continue;
    const DType dt = ci[1]->type().dtype;
    if (dt != DType::f32 && dt != DType::f64) continue;
    const Tensor ts[6] = {get(ci[1]), get(ci[2]), get(bi[1]), get(bi[2]), get(bi[3]), get(bi[4])};
    auto [w, b] = fold(ts, bn->attrs().get_double("eps"));
    by_bn.emplace(bn, Fold{conv, w, b});
    absorbed.insert(conv);
  }
  GraphConstants out_constants = constants;
  auto out = rewrite_graph(g, [&](const ir::Node& n, GraphCopy& copy) {
    if (absorbed.count(&n)) return true;  // replaced at its batch norm
    auto it = by_bn.find(&n);
    if (it == by_bn.end()) return false;
    const Fold& f = it->second;
    const ir::Value* wv = f.conv->inputs()[1];
    const std::string wname = input_name(g, wv);
    ir::Value* w = add_constant(copy, out_constants, f.weight, ir::ValueType::of(f.weight),
                                lathe::detail::str("bn_fold(", wname, ")"));
    ir::Value* b = add_constant(copy, out_constants, f.bias, ir::ValueType::of(f.bias),
                                lathe::detail::str("bn_fold(", wname, ").bias"));
    ir::Node* c = copy.graph->add_node(f.conv->op(), {copy[f.conv->inputs()[0]], w, b},
                                       f.conv->attrs(), {n.output()->type()});
    copy.map[n.output()] = c->output();
    return true;
  });
  out_constants.resize(out->inputs().size());
  constants = std::move(out_constants);
  if (folded) *folded = static_cast<int>(by_bn.size());
  return out;
}

}  // namespace lathe::backend::cpu
