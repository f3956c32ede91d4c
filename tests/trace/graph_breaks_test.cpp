// Graph breaks: a compiled function that reads tensor data runs as regions split at each read,
// compared with eager over many calls (results, gradients, no stale region), with the region
// counts asserted; lathe::cond keeps a branch on data in one graph; explain and the log topic.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "lathe/core/dispatch_mode.h"
#include "lathe/core/grad_mode.h"
#include "lathe/nn/layers.h"
#include "lathe/ops/ops.h"
#include "lathe/trace/compile.h"
#include "lathe/trace/control_flow.h"
#include "test_util.h"

using namespace lathe;
using lathe::test::contains;
using lathe::test::randn_seeded;
using lathe::test::same_values;

namespace {

constexpr double kTol = 1e-5;

// A branch on a value: both branches are taken across calls (inputs of either sign of sum).
std::vector<Tensor> branchy(const std::vector<Tensor>& in) {
  Tensor h = mul(in[0], 3.0);
  if (sum(h).item() > 0) return {add(relu(h), 1.0)};
  return {neg(tanh(h))};
}

Tensor signed_input(int call) {
  Tensor x = randn_seeded({4, 5}, 100 + call);
  const double s = sum(x).item();
  return (call % 2 == 0) == (s > 0) ? x : neg(x);  // even calls: positive sum
}

}  // namespace

TEST(GraphBreaks, BranchOnItemTakesBothBranchesAcrossCalls) {
  auto f = compile(branchy);
  for (int call = 0; call < 12; ++call) {
    Tensor x = signed_input(call);
    std::vector<Tensor> got = f({x});
    std::vector<Tensor> want = branchy({x});
    ASSERT_TRUE(same_values(got[0], want[0], kTol)) << "call " << call;
    ExplainReport r = f.explain_last_call();
    EXPECT_EQ(r.graph_count, 2) << r.to_string();
    EXPECT_EQ(r.graph_break_count, 1) << r.to_string();
  }
  // One region before the read, one per branch taken; later calls only replay them.
  const CompileStats s = f.stats();
  EXPECT_EQ(s.region_compiles, 3);
  EXPECT_EQ(s.region_calls, 12);
  EXPECT_EQ(s.compiles, 0);
  EXPECT_EQ(s.failed_traces, 0);
}

TEST(GraphBreaks, LoopWhoseTripCountIsATensorValue) {
  auto fn = [](const std::vector<Tensor>& in) {
    const int n = static_cast<int>(std::fabs(sum(in[0]).item())) % 4;
    Tensor y = in[0];
    for (int i = 0; i < n; ++i) y = add(mul(y, 0.5), 1.0);
    return std::vector<Tensor>{y, full({}, static_cast<double>(n))};
  };
  auto f = compile(fn);
  int64_t trips_seen = 0;
  for (int call = 0; call < 16; ++call) {
    Tensor x = mul(randn_seeded({3, 3}, 7 + call), 2.0);
    auto got = f({x});
    auto want = fn({x});
    ASSERT_TRUE(same_values(got[0], want[0], kTol)) << "call " << call;
    ASSERT_EQ(got[1].item(), want[1].item());
    trips_seen |= int64_t{1} << static_cast<int>(want[1].item());
  }
  // Regions: the sum, and one per trip count n >= 1 seen (n == 0 records no op after the read).
  int distinct_nonzero = 0;
  for (int n = 1; n < 4; ++n) distinct_nonzero += (trips_seen >> n) & 1;
  EXPECT_EQ(f.stats().region_compiles, 1 + distinct_nonzero);
}

TEST(GraphBreaks, EarlyExitAndAPrintInTheMiddle) {
  std::vector<std::string> printed;
  auto fn = [&printed](const std::vector<Tensor>& in) {
    Tensor h = relu(sub(in[0], 0.5));
    printed.push_back(h.to_string());                         // a print of a value in the middle
    if (amax(h).item() > 1.0) return std::vector<Tensor>{h};  // early exit
    return std::vector<Tensor>{mul(exp(h), 2.0)};
  };
  auto f = compile(fn);
  for (int call = 0; call < 8; ++call) {
    Tensor x = mul(randn_seeded({2, 3}, 30 + call), call % 2 ? 0.2 : 3.0);
    auto got = f({x});
    const std::string compiled_print = printed.back();
    auto want = fn({x});
    ASSERT_TRUE(same_values(got[0], want[0], kTol)) << "call " << call;
    EXPECT_EQ(compiled_print, printed.back()) << "call " << call;
  }
  ExplainReport r = f.explain_last_call();
  EXPECT_EQ(r.graph_break_count, 2) << r.to_string();
  ASSERT_EQ(r.break_reasons.size(), 2u);
  EXPECT_TRUE(contains(r.break_reasons[0],
                       "printing a tensor's values of f32[2,3] computed by "
                       "relu"))
      << r.break_reasons[0];
  EXPECT_TRUE(contains(r.break_reasons[1], "item() of f32[] computed by amax"))
      << r.break_reasons[1];
}

TEST(GraphBreaks, AReadSeesTheRegionsInPlaceWrites) {
  Tensor counter = zeros({1});
  auto fn = [&counter](const std::vector<Tensor>& in) {
    add_(counter, sum(in[0]));  // a write into a captured tensor, still pending
    const double seen = counter.item();
    return std::vector<Tensor>{mul(in[0], seen)};
  };
  auto f = compile(fn);
  Tensor eager_counter = zeros({1});
  for (int call = 0; call < 5; ++call) {
    Tensor x = randn_seeded({3}, 50 + call);
    auto got = f({x});
    add_(eager_counter, sum(x));
    Tensor want = mul(x, eager_counter.item());
    ASSERT_TRUE(same_values(got[0], want, kTol)) << "call " << call;
    ASSERT_TRUE(same_values(counter, eager_counter, kTol)) << "call " << call;
  }
}

TEST(GraphBreaks, CompiledModuleWithABreakKeepsItsRegions) {
  auto l1 = std::make_shared<nn::Linear>(8, 16);
  auto l2 = std::make_shared<nn::Linear>(16, 4);
  auto fn = [&](const std::vector<Tensor>& in) {
    Tensor h = relu(l1->forward(in[0]));
    const double scale = amax(h).item() > 2.0 ? 0.5 : 2.0;
    return std::vector<Tensor>{l2->forward(mul(h, scale))};
  };
  auto f = compile(fn);
  NoGradGuard no_grad;
  for (int call = 0; call < 10; ++call) {
    Tensor x = mul(randn_seeded({2, 8}, 70 + call), call % 3 ? 1.0 : 0.1);
    ASSERT_TRUE(same_values(f({x})[0], fn({x})[0], kTol)) << "call " << call;
  }
  EXPECT_LE(f.stats().region_compiles, 2);  // the scale is a number in the graph: one per value
  const int64_t compiles = f.stats().region_compiles;
  for (int call = 0; call < 5; ++call) f({randn_seeded({2, 8}, 90 + call)});
  EXPECT_EQ(f.stats().region_compiles, compiles);  // no stale region, nothing recompiled
  // New parameter values are read at the next call (captured by reference, never frozen).
  Tensor w2 = l2->named_parameters()[0].second;
  mul_(w2, 2.0);
  Tensor x = randn_seeded({2, 8}, 99);
  EXPECT_TRUE(same_values(f({x})[0], fn({x})[0], kTol));
}

TEST(GraphBreaks, GradientsFlowAcrossTheBreak) {
  Tensor w = randn_seeded({5, 3}, 11);
  w.set_requires_grad(true);
  auto fn = [&w](const std::vector<Tensor>& in) {
    Tensor h = matmul(in[0], w);
    const double s = sum(h).item() > 0 ? 1.0 : -3.0;
    return std::vector<Tensor>{sum(mul(tanh(h), s))};
  };
  auto f = compile(fn);
  for (int call = 0; call < 6; ++call) {
    Tensor x = randn_seeded({4, 5}, 200 + call);
    Tensor got = f({x})[0];
    got.backward();
    Tensor compiled_grad = w.grad().clone();
    w.set_grad(Tensor());
    Tensor want = fn({x})[0];
    want.backward();
    ASSERT_TRUE(same_values(got, want, kTol)) << "call " << call;
    ASSERT_TRUE(same_values(compiled_grad, w.grad(), kTol)) << "call " << call;
    w.set_grad(Tensor());
  }
  ExplainReport r = f.explain_last_call();
  ASSERT_EQ(r.eager_graphs.size(), 2u) << r.to_string();
  EXPECT_EQ(r.eager_graphs[0], 1) << r.to_string();  // regions needing grad run with autograd
}

TEST(GraphBreaks, FullgraphKeepsTheError) {
  CompileOptions o;
  o.fullgraph = true;
  auto f = compile(branchy, o);
  EXPECT_THROW(f({signed_input(0)}), DataReadWhileTracing);
  EXPECT_EQ(f.stats().failed_traces, 1);
}

TEST(GraphBreaks, ExplainReportsRegionsBreaksAndOps) {
  ExplainReport r = explain(branchy, {signed_input(0)});
  EXPECT_EQ(r.graph_count, 2);
  EXPECT_EQ(r.graph_break_count, 1);
  ASSERT_EQ(r.ops_per_graph.size(), 2u);
  EXPECT_EQ(r.ops_per_graph[0], 2);  // mul, sum
  const std::string text = r.to_string();
  EXPECT_TRUE(contains(text, "Graph Count: 2")) << text;
  EXPECT_TRUE(contains(text, "1. item() of f32[] computed by sum")) << text;
  // Without a break: one graph.
  ExplainReport one =
      explain([](const std::vector<Tensor>& in) { return relu(in[0]); }, {randn_seeded({3}, 1)});
  EXPECT_EQ(one.graph_count, 1);
  EXPECT_EQ(one.graph_break_count, 0);
  EXPECT_EQ(one.ops_per_graph.at(0), 1);
}

TEST(GraphBreaks, LogTopicNamesEachNewRegionOnce) {
  std::vector<std::string> lines;
  CompileLogSink previous = set_compile_log_sink([&](const std::string& m) { lines.push_back(m); });
  CompileOptions o;
  o.logs = "graph_breaks";
  o.name = "branchy";
  auto f = compile(branchy, o);
  for (int call = 0; call < 6; ++call) f({signed_input(call)});
  set_compile_log_sink(previous);
  int regions = 0, starts = 0;
  for (const std::string& l : lines) {
    if (!contains(l, "[lathe.graph_breaks]")) continue;
    regions += contains(l, "'branchy': region ");
    starts += contains(l, "running it as regions");
  }
  EXPECT_EQ(starts, 1);
  EXPECT_EQ(regions, 3);  // one line per region compiled, not per call
}

TEST(GraphBreaks, CondStaysInOneGraph) {
  auto fn = [](const std::vector<Tensor>& in) {
    return cond(
        gt(sum(in[0]), 0.0),
        [](const std::vector<Tensor>& a) { return std::vector<Tensor>{relu(a[0])}; },
        [](const std::vector<Tensor>& a) { return std::vector<Tensor>{mul(a[0], -2.0)}; }, in);
  };
  auto f = compile(fn);
  for (int call = 0; call < 6; ++call) {
    Tensor x = signed_input(call);
    ASSERT_TRUE(same_values(f({x})[0], fn({x})[0], kTol)) << "call " << call;
  }
  EXPECT_EQ(f.stats().compiles, 1);
  EXPECT_EQ(f.stats().region_calls, 0);
  EXPECT_EQ(f.explain_last_call().graph_count, 1);
}

TEST(GraphBreaks, CondRejectsBranchesThatDisagreeOrWrite) {
  Tensor buf = zeros({3});
  auto writes = compile([&buf](const std::vector<Tensor>& in) {
    return cond(
        gt(sum(in[0]), 0.0),
        [&buf](const std::vector<Tensor>& a) mutable {
          add_(buf, a[0]);
          return std::vector<Tensor>{a[0]};
        },
        [](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0]}; }, in);
  });
  try {
    writes({randn_seeded({3}, 1)});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "[cond] then_fn writes a tensor in place")) << e.what();
  }
  auto shapes = compile([](const std::vector<Tensor>& in) {
    return cond(
        gt(sum(in[0]), 0.0), [](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0]}; },
        [](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(a[0])}; }, in);
  });
  try {
    shapes({randn_seeded({3}, 1)});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "[cond] output 0 is f32[3] in then_fn and f32[] in else_fn"))
        << e.what();
  }
}
