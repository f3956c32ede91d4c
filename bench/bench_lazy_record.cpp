// The cost of recording on the lazy device ("trace every time"), with Google Benchmark.
//   bench_lazy_record [--benchmark_filter=...]
// lazy::Metrics::trace_s times one recorded op in 8 and scales (lazy_device.cpp, kTimedEvery):
// the counters read from it are estimates; ns_per_op and overhead_pct are measured by
// this program's own clock.
// LazyRecordOp: one 1-element `add` recorded lazily (dispatch, shape rule, record, hash), synced
// every 64 ops outside the timing; counter record_us = trace_s per op (the recording alone),
// ns_per_op the whole op by wall time. EagerDispatchOp: the same add run eagerly, for scale.
// LazyMobilenetCall: one mobilenet_v2 batch-1 call on the lazy device (input moved, output read,
// cache hit); counter trace_hash_pct = (trace_s + hash_s) / call time, in percent;
// overhead_pct = (call time - execute_s) / call time: everything but running the executable
// (model code, dispatch, shape rules, recording, hashing, transfers, binding the results).
#include <benchmark/benchmark.h>

#include <chrono>

#include "lathe/lazy/lazy.h"
#include "lathe/models/registry.h"
#include "lathe/ops/ops.h"

using namespace lathe;

namespace {

constexpr int kOpsPerSync = 64;

void LazyRecordOp(benchmark::State& state) {
  Tensor x = full({1}, 1.0).to(Device::lazy());
  Tensor y = full({1}, 2.0).to(Device::lazy());
  lazy::reset_metrics();
  int64_t ops = 0;
  for (auto _ : state) {
    Tensor z = x;
    for (int i = 0; i < kOpsPerSync; ++i) z = add(z, y);
    ops += kOpsPerSync;
    state.PauseTiming();
    z.to(Device::cpu());
    state.ResumeTiming();
  }
  lazy::Metrics m = lazy::metrics();
  state.SetItemsProcessed(ops);
  state.counters["record_us"] = 1e6 * m.trace_s / static_cast<double>(ops);
  state.counters["ns_per_op"] = benchmark::Counter(
      static_cast<double>(ops), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(LazyRecordOp)->Unit(benchmark::kMicrosecond);

void EagerDispatchOp(benchmark::State& state) {
  Tensor x = full({1}, 1.0), y = full({1}, 2.0);
  int64_t ops = 0;
  for (auto _ : state) {
    Tensor z = x;
    for (int i = 0; i < kOpsPerSync; ++i) z = add(z, y);
    benchmark::DoNotOptimize(z);
    ops += kOpsPerSync;
  }
  state.SetItemsProcessed(ops);
  state.counters["ns_per_op"] = benchmark::Counter(
      static_cast<double>(ops), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(EagerDispatchOp)->Unit(benchmark::kMicrosecond);

void LazyMobilenetCall(benchmark::State& state) {
  models::ModelOptions mo;
  mo.seed = 0;
  auto spec = models::create_model("mobilenet_v2", mo);
  spec->module->eval();
  spec->module->to(Device::lazy());
  std::vector<Tensor> inputs = models::default_inputs("mobilenet_v2", 1, 1);
  auto call = [&] {
    std::vector<Tensor> in;
    for (const Tensor& t : inputs) in.push_back(t.to(Device::lazy()));
    for (const Tensor& t : spec->forward(in)) t.to(Device::cpu());
  };
  call();  // compiles
  lazy::reset_metrics();
  double total = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    call();
    total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  lazy::Metrics m = lazy::metrics();
  const double calls = static_cast<double>(state.iterations());
  state.counters["ops"] = static_cast<double>(m.ops_traced) / calls;
  state.counters["trace_us"] = 1e6 * m.trace_s / calls;
  state.counters["hash_us"] = 1e6 * m.hash_s / calls;
  state.counters["record_us_per_op"] = 1e6 * m.trace_s / static_cast<double>(m.ops_traced);
  state.counters["trace_hash_pct"] = 100 * (m.trace_s + m.hash_s) / total;
  state.counters["overhead_pct"] = 100 * (total - m.execute_s) / total;
  state.counters["graphs_built"] = static_cast<double>(m.graphs_built);
}
BENCHMARK(LazyMobilenetCall)->Unit(benchmark::kMillisecond)->MinTime(3.0);

// LazyMobilenetRecord: the recording of one mobilenet_v2 batch-1 forward alone: the model code
// runs on the lazy device (module calls, dispatch, shape rules, record, hash) and its results are
// dropped, so the sync after it has nothing live and runs nothing. ns_per_op: CPU time per op of
// the whole forward, by the benchmark's clock; trace_us_per_op: Metrics::trace_s per op (the
// recording alone, estimated).
void LazyMobilenetRecord(benchmark::State& state) {
  models::ModelOptions mo;
  mo.seed = 0;
  auto spec = models::create_model("mobilenet_v2", mo);
  spec->module->eval();
  spec->module->to(Device::lazy());
  std::vector<Tensor> in;
  for (const Tensor& t : models::default_inputs("mobilenet_v2", 1, 1))
    in.push_back(t.to(Device::lazy()));
  lazy::reset_metrics();
  for (auto _ : state) {
    spec->forward(in);  // results dropped
    state.PauseTiming();
    lathe::sync();  // nothing live: ends the window, runs nothing
    state.ResumeTiming();
  }
  lazy::Metrics m = lazy::metrics();
  const double ops = static_cast<double>(m.ops_traced);
  state.counters["ops"] = ops / static_cast<double>(state.iterations());
  state.counters["executions"] = static_cast<double>(m.executions);
  state.counters["ns_per_op"] =
      benchmark::Counter(ops, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["trace_us_per_op"] = 1e6 * m.trace_s / ops;
}
BENCHMARK(LazyMobilenetRecord)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
