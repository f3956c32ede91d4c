// Cost of the compiled-call machinery: the guard check of a resnet50 cache entry (one input and
// every module's structure version), and a compiled call of a trivial graph (one add of
// 1-element tensors) against the same add run eagerly, and a chain of 100 steps (the cost per
// step of the planned executor).
//
//   ninja -C build bench_compile && ./build/bench_compile --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "lathe/models/registry.h"
#include "lathe/nn/module.h"
#include "lathe/ops/ops.h"
#include "lathe/trace/compile.h"

using namespace lathe;

namespace {

struct Resnet50Entry {
  std::shared_ptr<models::ModelSpec> spec;
  CompiledFunction f;
  std::vector<Arg> args;
  size_t modules = 0, captured = 0;
};

Resnet50Entry& resnet50_entry() {
  static Resnet50Entry* e = [] {
    models::ModelOptions mo;
    mo.seed = 0;
    auto spec = models::create_model("resnet50", mo);
    auto* r = new Resnet50Entry{spec, compile(spec->module), {}, 0, 0};
    models::InputOptions io;
    io.image_size = 32;  // the guard check does not depend on the image size
    r->args = {models::default_inputs("resnet50", 1, 0, io)[0]};
    r->f(r->args);  // trace and compile once
    r->modules = spec->module->named_modules().size();
    r->captured = spec->module->named_parameters().size() + spec->module->named_buffers().size();
    return r;
  }();
  return *e;
}

void BM_GuardCheckResnet50(benchmark::State& state) {
  Resnet50Entry& e = resnet50_entry();
  if (e.f.check_guards(e.args) != 0) state.SkipWithError("the entry does not hit");
  for (auto _ : state) benchmark::DoNotOptimize(e.f.check_guards(e.args));
  state.counters["modules"] = static_cast<double>(e.modules);
  state.counters["tensors"] = static_cast<double>(e.captured);
}
BENCHMARK(BM_GuardCheckResnet50);

std::vector<Tensor> one_add(const std::vector<Tensor>& in) { return {add(in[0], in[1])}; }

void BM_EagerTrivialAdd(benchmark::State& state) {
  std::vector<Tensor> in = {full({1}, 1.0), full({1}, 2.0)};
  for (auto _ : state) benchmark::DoNotOptimize(one_add(in));
}
BENCHMARK(BM_EagerTrivialAdd);

void BM_CompiledTrivialAdd(benchmark::State& state) {
  std::vector<Tensor> in = {full({1}, 1.0), full({1}, 2.0)};
  auto f = compile(one_add);
  f(in);
  for (auto _ : state) benchmark::DoNotOptimize(f(in));
  if (f.stats().compiles != 1) state.SkipWithError("recompiled");
}
BENCHMARK(BM_CompiledTrivialAdd);

void BM_GuardCheckTrivialAdd(benchmark::State& state) {
  std::vector<Tensor> in = {full({1}, 1.0), full({1}, 2.0)};
  auto f = compile(one_add);
  f(in);
  std::vector<Arg> args(in.begin(), in.end());
  for (auto _ : state) benchmark::DoNotOptimize(f.check_guards(args));
}
BENCHMARK(BM_GuardCheckTrivialAdd);

// The executor's cost per step: a compiled chain of 100 adds of 1-element tensors (fuse_pointwise
// off, so each add stays a step of its own), guards included; counter us_per_step.
std::vector<Tensor> add_chain(const std::vector<Tensor>& in) {
  Tensor x = in[0];
  for (int i = 0; i < 100; ++i) x = add(x, in[1]);
  return {x};
}

void BM_CompiledChain100Steps(benchmark::State& state) {
  setenv("LATHE_DISABLE_PASSES", "fuse_pointwise", 1);
  std::vector<Tensor> in = {full({1}, 1.0), full({1}, 2.0)};
  auto f = compile(add_chain);
  f(in);
  unsetenv("LATHE_DISABLE_PASSES");
  int64_t calls = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(f(in));
    ++calls;
  }
  if (f.stats().compiles != 1) state.SkipWithError("recompiled");
  state.counters["us_per_step"] = benchmark::Counter(
      static_cast<double>(calls) * 100, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_CompiledChain100Steps);

}  // namespace

BENCHMARK_MAIN();
