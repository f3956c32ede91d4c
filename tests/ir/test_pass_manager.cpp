// The pass manager alone, on a toy graph with toy passes: order, verification after each pass
// (naming the pass that broke the graph), disabling by name, the log, backward graphs.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "ir_test_util.h"
#include "lathe/ir/pass_manager.h"

namespace lathe::ir {
namespace {

using namespace testing;
using S = detail::GraphSurgery;

// %0 = x [2,3]; %1 = relu(%0); %2 = relu(%0) (unused); output %1
std::unique_ptr<Graph> toy_graph() {
  auto g = std::make_unique<Graph>();
  Value* x = g->add_input(T({2, 3}), arg(0));
  Node* r = g->add_node(op("relu"), {x}, {}, {T({2, 3})});
  g->add_node(op("relu"), {x}, {}, {T({2, 3})});
  g->set_outputs({r->output()});
  return g;
}

// Appends its name to a trace and leaves the graph alone.
Pass tracer(const std::string& name, std::vector<std::string>* trace) {
  return {name,
          [name, trace](std::unique_ptr<Graph>&, PassContext& ctx) {
            trace->push_back(name);
            ctx.summary = "traced";
            return false;
          },
          ""};
}

// Breaks topological order: the graph's last node goes first, before what it reads.
Pass breaker() {
  return {"breaker",
          [](std::unique_ptr<Graph>& g, PassContext&) {
            Value* x = g->inputs()[0];
            Node* a = g->add_node(op("relu"), {x}, {}, {T({2, 3})});
            g->add_node(op("relu"), {a->output()}, {}, {T({2, 3})});
            S::move_last_node(*g, 0);
            return true;
          },
          ""};
}

TEST(PassManager, RunsInOrderAndRecords) {
  std::vector<std::string> trace;
  PassManager m({tracer("a", &trace), dce_pass(), tracer("b", &trace)});
  auto g = toy_graph();
  PassContext ctx;
  m.run(g, ctx);
  EXPECT_EQ(trace, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(g->num_nodes(), 1u);  // dce removed the unused relu
  ASSERT_EQ(m.records().size(), 3u);
  EXPECT_FALSE(m.records()[0].changed);
  EXPECT_TRUE(m.records()[1].changed);
  EXPECT_EQ(m.records()[1].nodes_before, 2u);
  EXPECT_EQ(m.records()[1].nodes_after, 1u);
  EXPECT_EQ(m.records()[1].summary, "1 nodes removed");
  EXPECT_EQ(m.names(), (std::vector<std::string>{"a", "dce", "b"}));
  EXPECT_EQ(pass_list_string(m.passes()), "a\ndce\nb\n");
}

TEST(PassManager, VerifyNamesTheBrokenPass) {
  std::vector<std::string> trace;
  PassManager m({tracer("a", &trace), breaker(), tracer("b", &trace)});
  auto g = toy_graph();
  PassContext ctx;
  try {
    m.run(g, ctx);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pass 'breaker' broke the graph"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("[ir.verify]"), std::string::npos) << e.what();
  }
  EXPECT_EQ(trace, (std::vector<std::string>{"a"}));  // nothing ran after it
}

TEST(PassManager, DisablesByName) {
  std::vector<std::string> trace;
  PassManagerOptions o;
  o.disabled = {"breaker", "a"};
  PassManager m({tracer("a", &trace), breaker(), tracer("b", &trace)}, o);
  auto g = toy_graph();
  PassContext ctx;
  EXPECT_NO_THROW(m.run(g, ctx));
  EXPECT_EQ(trace, (std::vector<std::string>{"b"}));
  EXPECT_FALSE(m.records()[0].ran);
  EXPECT_FALSE(m.records()[1].ran);
  EXPECT_TRUE(m.records()[2].ran);
}

TEST(PassManager, UnknownDisabledNameListsTheKnownOnes) {
  std::vector<std::string> trace;
  PassManagerOptions o;
  o.disabled = {"no_such_pass"};
  PassManager m({tracer("a", &trace), dce_pass()}, o);
  auto g = toy_graph();
  PassContext ctx;
  try {
    m.run(g, ctx);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("unknown pass 'no_such_pass'"), std::string::npos) << what;
    EXPECT_NE(what.find("known: a, dce"), std::string::npos) << what;
  }
  EXPECT_TRUE(trace.empty());
}

TEST(PassManager, LogsOneLinePerPass) {
  std::vector<std::string> trace;
  std::ostringstream log;
  PassManagerOptions o;
  o.log = true;
  o.log_stream = &log;
  o.disabled = {"b"};
  PassManager m({tracer("a", &trace), dce_pass(), tracer("b", &trace)}, o);
  auto g = toy_graph();
  PassContext ctx;
  m.run(g, ctx);
  const std::string s = log.str();
  EXPECT_NE(s.find("[lathe.passes] a: unchanged, 2 -> 2 nodes, "), std::string::npos) << s;
  EXPECT_NE(s.find(" ms (traced)\n"), std::string::npos) << s;
  EXPECT_NE(s.find("[lathe.passes] dce: changed, 2 -> 1 nodes, "), std::string::npos) << s;
  EXPECT_NE(s.find("[lathe.passes] b: disabled\n"), std::string::npos) << s;
  EXPECT_EQ(s.find("relu"), std::string::npos) << "no graphs without log_graphs: " << s;
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 3);
}

TEST(PassManager, LogGraphsPrintsTheGraphAfterEachPass) {
  std::ostringstream log;
  PassManagerOptions o;
  o.log = o.log_graphs = true;
  o.log_stream = &log;
  PassManager m({dce_pass()}, o);
  auto g = toy_graph();
  PassContext ctx;
  m.run(g, ctx);
  EXPECT_NE(log.str().find(g->to_string()), std::string::npos) << log.str();
}

TEST(PassManager, NoLogWhenOff) {
  std::ostringstream log;
  PassManagerOptions o;
  o.log_stream = &log;
  PassManager m({dce_pass()}, o);
  auto g = toy_graph();
  PassContext ctx;
  m.run(g, ctx);
  EXPECT_EQ(log.str(), "");
}

TEST(PassManager, SkipsPassesThatSayWhyNotOnBackwardGraphs) {
  std::vector<std::string> trace;
  Pass fwd_only = tracer("fwd_only", &trace);
  fwd_only.not_on_backward = "toy: forward only";
  PassManager m({fwd_only, tracer("both", &trace)});
  auto g = toy_graph();
  PassContext ctx;
  ctx.backward = true;
  m.run(g, ctx);
  EXPECT_EQ(trace, (std::vector<std::string>{"both"}));
  EXPECT_NE(m.records()[0].summary.find("toy: forward only"), std::string::npos);
  ctx.backward = false;
  trace.clear();
  m.run(g, ctx);
  EXPECT_EQ(trace, (std::vector<std::string>{"fwd_only", "both"}));
}

TEST(PassManager, CseAndFunctionalizePasses) {
  auto g = toy_graph();
  PassContext ctx;
  PassManager m({functionalize_pass(), cse_pass(), dce_pass()});
  m.run(g, ctx);
  EXPECT_EQ(m.records()[0].summary, "no writes");
  EXPECT_TRUE(m.records()[1].changed);  // the two relus of x are one
  EXPECT_EQ(g->num_nodes(), 1u);
}

}  // namespace
}  // namespace lathe::ir
