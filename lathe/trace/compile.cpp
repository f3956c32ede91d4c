#include "lathe/trace/compile.h"

#include "lathe/nn/module.h"
#include "lathe/trace/compile_cache.h"
#include "lathe/trace/dim_hints.h"

namespace lathe {

CompiledFunction::CompiledFunction(Fn fn, CompileOptions options)
    : cache_(std::make_shared<detail::CompileCache>(std::move(fn), std::move(options), nullptr)) {}

CompiledFunction::CompiledFunction(std::shared_ptr<nn::Module> module, CompileOptions options) {
  LATHE_CHECK(module != nullptr, "[compile] module is null");
  nn::Module* m = module.get();
  Fn fn = [m](const std::vector<Arg>& args) {
    std::vector<Tensor> ts;
    ts.reserve(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      const Tensor* t = std::get_if<Tensor>(&args[i]);
      LATHE_CHECK(t != nullptr, "[compile] argument ", i,
                  " of a compiled module is a scalar; modules take tensors");
      ts.push_back(*t);
    }
    return m->forward_all(ts);
  };
  cache_ =
      std::make_shared<detail::CompileCache>(std::move(fn), std::move(options), std::move(module));
}

std::vector<Tensor> CompiledFunction::operator()(const std::vector<Arg>& args) const {
  return cache_->call(args);
}

std::vector<Tensor> CompiledFunction::operator()(const std::vector<Tensor>& args) const {
  return cache_->call(std::vector<Arg>(args.begin(), args.end()));
}

std::vector<Tensor> CompiledFunction::operator()(std::initializer_list<Tensor> args) const {
  return cache_->call(std::vector<Arg>(args.begin(), args.end()));
}

CompileStats CompiledFunction::stats() const { return cache_->stats(); }
size_t CompiledFunction::num_entries() const { return cache_->num_entries(); }
int CompiledFunction::check_guards(const std::vector<Arg>& args) const {
  return cache_->check_guards(args);
}
std::string CompiledFunction::last_recompile_reason() const {
  return cache_->last_recompile_reason();
}
std::string CompiledFunction::graph_string(size_t entry) const {
  return cache_->graph_string(entry);
}
std::string CompiledFunction::guards_string(size_t entry) const {
  return cache_->guards_string(entry);
}
void CompiledFunction::reset() { cache_->reset(); }
ExplainReport CompiledFunction::explain_last_call() const { return cache_->explain_last_call(); }

std::string ExplainReport::to_string() const {
  int64_t ops = 0;
  for (int64_t n : ops_per_graph) ops += n;
  std::string s =
      detail::str("Graph Count: ", graph_count, "\nGraph Break Count: ", graph_break_count,
                  "\nOp Count: ", ops, "\nOps per Graph:");
  for (size_t i = 0; i < ops_per_graph.size(); ++i)
    s += detail::str(" ", ops_per_graph[i],
                     i < eager_graphs.size() && eager_graphs[i] ? " (eager, grad)" : "");
  s += "\nBreak Reasons:";
  for (size_t i = 0; i < break_reasons.size(); ++i)
    s += detail::str("\n  ", i + 1, ". ", break_reasons[i]);
  s += detail::str("\nCompiles: ", compiles, "\nRecompile Reasons:");
  for (size_t i = 0; i < recompile_reasons.size(); ++i)
    s += detail::str("\n  ", i + 1, ". ", recompile_reasons[i]);
  return s;
}

CompiledFunction compile(std::shared_ptr<nn::Module> module, CompileOptions options) {
  return CompiledFunction(std::move(module), std::move(options));
}

static DimHints::Dim& hint_slot(const Tensor& t, int64_t dim, const char* who) {
  LATHE_CHECK(t.defined(), "[", who, "] tensor is undefined");
  int64_t n = t.dim();
  int64_t d = dim < 0 ? dim + n : dim;
  LATHE_CHECK(d >= 0 && d < n, "[", who, "] dim ", dim, " is out of range for ", t.shape_string());
  std::shared_ptr<TensorExtension>& slot = t.impl().extension(TensorSlot::compile_hints);
  if (!slot) slot = std::make_shared<DimHints>();
  auto& h = static_cast<DimHints&>(*slot);
  if (h.dims.size() < static_cast<size_t>(n)) h.dims.resize(n);
  return h.dims[d];
}

void mark_dynamic(const Tensor& t, int64_t dim, int64_t min, int64_t max) {
  LATHE_CHECK(min >= 0 && min <= max, "[mark_dynamic] invalid range [", min, ", ", max, "]");
  DimHints::Dim& d = hint_slot(t, dim, "mark_dynamic");
  d.kind = DimHints::Kind::kDynamic;
  d.min = min;
  d.max = max;
}

void mark_static(const Tensor& t, int64_t dim) {
  hint_slot(t, dim, "mark_static").kind = DimHints::Kind::kStatic;
}

}  // namespace lathe
