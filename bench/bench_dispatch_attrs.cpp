// Per-op overhead of attribute handling on the hot paths, with Google Benchmark.
//   bench_dispatch_attrs [--benchmark_repetitions=5]
// InterpreterConvPool: an ir::Graph of 64 ops (conv2d 3x3 / max_pool2d 3x3 alternating, on a
// tiny [1,8,4,4] input, so the fixed per-op cost shows) run by the interpreter; counter
// ns_per_op. EagerConvPool: the same 64 ops dispatched eagerly. ShapeRule/<op>: the op's shape
// rule on a graph node's attributes (what the interpreter runs before each kernel; no kernel, so
// the attribute handling is a large part of it), for conv2d, max_pool2d and conv2d_fused.
// EagerAttrs/<op>/<by_name|parsed_once>: what an eager call does with its attributes besides the
// kernel's compute: build them, run the shape rule, read them as the kernel does; by name (as
// before eager calls parsed) or parsed once by OpDef::parse_attrs (as conv2d() and max_pool2d()
// do now), side by side in one run.
#include <benchmark/benchmark.h>

#include "lathe/backend/backend.h"
#include "lathe/core/random.h"
#include "lathe/ir/graph.h"
#include "lathe/kernels/dnnl_pool.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"

using namespace lathe;

namespace {

constexpr int kOps = 64;

struct Chain {
  Tensor x = randn({1, 8, 4, 4});
  Tensor w = full({8, 8, 3, 3}, 1.0 / 72);
  Tensor b = randn({8});
};

Tensor run_eager(const Chain& c) {
  Tensor cur = c.x;
  for (int i = 0; i < kOps / 2; ++i)
    cur = max_pool2d(conv2d(cur, c.w, c.b, {1, 1}, {1, 1}), {3, 3}, {1, 1}, {1, 1});
  return cur;
}

void InterpreterConvPool(benchmark::State& state) {
  Chain c;
  ir::Graph g;
  auto input = [&](const Tensor& t, int i) {
    ir::InputSource s;
    s.index = i;
    return g.add_input(ir::ValueType::of(t), s);
  };
  ir::Value* v = input(c.x, 0);
  ir::Value* w = input(c.w, 1);
  ir::Value* b = input(c.b, 2);
  const Attrs conv{{"stride", Shape{1, 1}},
                   {"padding", Shape{1, 1}},
                   {"dilation", Shape{1, 1}},
                   {"groups", int64_t{1}}};
  const Attrs pool{{"kernel", Shape{3, 3}},
                   {"stride", Shape{1, 1}},
                   {"padding", Shape{1, 1}},
                   {"dilation", Shape{1, 1}},
                   {"ceil_mode", false}};
  const OpDef& conv_op = OpRegistry::global().get("conv2d");
  const OpDef& pool_op = OpRegistry::global().get("max_pool2d");
  Tensor cur = c.x;
  for (int i = 0; i < kOps / 2; ++i) {
    Tensor y = conv2d(cur, c.w, c.b, {1, 1}, {1, 1});
    v = g.add_node(conv_op, {v, w, b}, conv, {ir::ValueType::of(y)})->output(0);
    cur = max_pool2d(y, {3, 3}, {1, 1}, {1, 1});
    v = g.add_node(pool_op, {v}, pool, {ir::ValueType::of(cur)})->output(0);
  }
  g.set_outputs({v});
  auto exe = backend::create_backend("interpreter")->compile(g);
  const std::vector<Tensor> args{c.x, c.w, c.b};
  for (auto _ : state) benchmark::DoNotOptimize(exe->run(args, {}));
  state.counters["ns_per_op"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kOps),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(InterpreterConvPool)->Unit(benchmark::kMicrosecond);

void EagerConvPool(benchmark::State& state) {
  Chain c;
  for (auto _ : state) benchmark::DoNotOptimize(run_eager(c));
  state.counters["ns_per_op"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kOps),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(EagerConvPool)->Unit(benchmark::kMicrosecond);

void ShapeRule(benchmark::State& state, const char* op_name) {
  Chain c;
  const OpDef& op = OpRegistry::global().get(op_name);
  std::vector<Tensor> args;
  Attrs attrs{{"stride", Shape{1, 1}}, {"padding", Shape{1, 1}}, {"dilation", Shape{1, 1}}};
  if (op.name == "max_pool2d") {
    args = {c.x};
    attrs.set("kernel", Shape{3, 3}).set("ceil_mode", false);
  } else {
    args = {c.x, c.w, c.b};
    attrs.set("groups", int64_t{1});
  }
  if (op.name == "conv2d_fused") {
    args.resize(8);
    attrs.set("act", std::string("clip")).set("act_min", 0.0).set("act_max", 6.0);
    attrs.set("act2", std::string("none")).set("act2_min", 0.0).set("act2_max", 0.0);
  }
  ir::Graph g;
  std::vector<ir::Value*> ins;
  for (size_t i = 0; i < args.size(); ++i) {
    ir::InputSource s;
    s.index = static_cast<int>(i);
    ins.push_back(args[i].defined() ? g.add_input(ir::ValueType::of(args[i]), s) : nullptr);
  }
  const std::vector<TensorMeta> metas = op.shape(args, attrs);
  ir::Node* n = g.add_node(
      op, ins, attrs,
      {ir::ValueType{metas[0].dtype, metas[0].device, metas[0].sizes, metas[0].strides}});
  for (auto _ : state) benchmark::DoNotOptimize(op.shape(args, n->attrs()));
}
BENCHMARK_CAPTURE(ShapeRule, conv2d, "conv2d");
BENCHMARK_CAPTURE(ShapeRule, max_pool2d, "max_pool2d");
BENCHMARK_CAPTURE(ShapeRule, conv2d_fused, "conv2d_fused");

void EagerAttrs(benchmark::State& state, const char* op_name, bool parse_once) {
  Chain c;
  const OpDef& op = OpRegistry::global().get(op_name);
  const bool conv = op.name == "conv2d";
  const std::vector<Tensor> args = conv ? std::vector<Tensor>{c.x, c.w, c.b} : std::vector{c.x};
  const std::vector<int64_t> one{1, 1}, three{3, 3};
  for (auto _ : state) {
    Attrs attrs = conv ? Attrs{{"stride", to_shape(one)},
                               {"padding", to_shape(one)},
                               {"dilation", to_shape(one)},
                               {"groups", int64_t{1}}}
                       : Attrs{{"kernel", to_shape(three)},
                               {"stride", to_shape(one)},
                               {"padding", to_shape(one)},
                               {"dilation", to_shape(one)},
                               {"ceil_mode", false}};
    if (parse_once) attach_parsed_attrs(op, attrs);
    benchmark::DoNotOptimize(op.shape(args, attrs));
    if (conv)
      benchmark::DoNotOptimize(detail::conv_params(attrs));
    else
      benchmark::DoNotOptimize(detail::pool2d_params(attrs, "max_pool2d", true));
  }
}
BENCHMARK_CAPTURE(EagerAttrs, conv2d / by_name, "conv2d", false);
BENCHMARK_CAPTURE(EagerAttrs, conv2d / parsed_once, "conv2d", true);
BENCHMARK_CAPTURE(EagerAttrs, max_pool2d / by_name, "max_pool2d", false);
BENCHMARK_CAPTURE(EagerAttrs, max_pool2d / parsed_once, "max_pool2d", true);

}  // namespace

BENCHMARK_MAIN();
