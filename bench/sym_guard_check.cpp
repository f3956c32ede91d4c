// Cost of GuardProgram::check for a 10-instruction program (target: under 50 ns), and of inline
// SymInt arithmetic against plain int64 (eager code must not get slower).
//
// Build by hand against the sym library only (the command is in docs/sym.md): g++ -O3
// -std=c++20 -I. bench/sym_guard_check.cpp build-sym/liblathe_sym.a -lbenchmark -lpthread

#include <benchmark/benchmark.h>

#include <cstdio>
#include <vector>

#include "lathe/sym/shape_env.h"

namespace {

using namespace lathe::sym;

// x [8, 16], y [8, 16], k = 3: two symbols, two duck equalities, a scalar, three guards (one a
// general expression), two ranges.
GuardProgram make_program() {
  ShapeEnv env;
  SymInt x0 = env.create_symbol(8, Source::size(0, 0));
  SymInt x1 = env.create_symbol(16, Source::size(0, 1));
  env.create_symbol(8, Source::size(1, 0));
  env.create_symbol(16, Source::size(1, 1));
  env.create_symbol(3, Source::scalar(2), DimPolicy::kStatic);
  (void)(mod(x0 * x1, 8) == 0).guard("[reshape] 8 divides numel");
  (void)(x0 > 4).guard("[pad] size(0) > 4");
  (void)(mod(x1, 4) == 0).guard("[unfold] 4 divides size(1)");
  return env.produce_guards();
}

struct Inputs {
  int64_t xs[2] = {8, 16}, xt[2] = {16, 1};
  int64_t ys[2] = {8, 16}, yt[2] = {16, 1};
  std::vector<ArgView> views;
  Inputs() {
    views = {ArgView::tensor(xs, xt, 2), ArgView::tensor(ys, yt, 2), ArgView::integer(3)};
  }
};

void BM_GuardCheckPass(benchmark::State& state) {
  GuardProgram p = make_program();
  if (p.size() != 10) state.SkipWithError("expected a 10-instruction program");
  Inputs in;
  for (auto _ : state) {
    GuardCheck r = p.check(in.views);
    benchmark::DoNotOptimize(r);
  }
  state.counters["instructions"] = static_cast<double>(p.size());
}
BENCHMARK(BM_GuardCheckPass);

// A recompile check: the first 6 instructions pass, "arg0.size(0) > 4" (index 6) fails.
void BM_GuardCheckFailAtSeventh(benchmark::State& state) {
  GuardProgram p = make_program();
  Inputs in;
  in.xs[0] = in.ys[0] = 4;
  if (p.check(in.views).failed != 6) state.SkipWithError("expected instruction 6 to fail");
  for (auto _ : state) {
    GuardCheck r = p.check(in.views);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_GuardCheckFailAtSeventh);

void BM_Int64Arithmetic(benchmark::State& state) {
  int64_t a = 3, b = 5;
  for (auto _ : state) {
    benchmark::DoNotOptimize(a);
    benchmark::DoNotOptimize(b);
    int64_t r = (a + b) * a - b;
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_Int64Arithmetic);

void BM_InlineSymIntArithmetic(benchmark::State& state) {
  SymInt a = 3, b = 5;
  for (auto _ : state) {
    benchmark::DoNotOptimize(a);
    benchmark::DoNotOptimize(b);
    SymInt r = (a + b) * a - b;
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_InlineSymIntArithmetic);

}  // namespace

int main(int argc, char** argv) {
  std::fputs(make_program().to_string().c_str(), stderr);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
