// functionalize: programs that write into their inputs, into buffers (batch_norm's running stats
// in training) and through views of inputs give the same results, on real data with the
// interpreter, before and after the pass; afterwards no node writes (by the op facts).
#include <gtest/gtest.h>

#include <functional>
#include <memory>

#include "lathe/backend/cpu/cpu_backend.h"
#include "lathe/backend/interpreter.h"
#include "lathe/core/random.h"
#include "lathe/ir/functionalize.h"
#include "lathe/nn/layers.h"
#include "lathe/nn/module.h"
#include "lathe/ops/ops.h"
#include "lathe/sym/shape_env.h"
#include "lathe/trace/compile.h"
#include "tests/ir/ir_test_util.h"

namespace lathe::ir {
namespace {

using testing::op;

// A graph built by hand from real example inputs; output types come from the shape rules.
struct Program {
  std::unique_ptr<Graph> g = std::make_unique<Graph>();
  std::vector<Tensor> inputs;

  Value* input(const Tensor& t) {
    inputs.push_back(t);
    return g->add_input(ValueType::of(t), testing::arg(static_cast<int>(inputs.size() - 1)));
  }
  Node* node(const char* name, std::vector<Value*> in, Attrs a) {
    const OpDef& def = op(name);
    std::vector<Tensor> fakes;
    for (Value* v : in) {
      if (!v) {
        fakes.push_back(Tensor());
        continue;
      }
      const ValueType& t = v->type();
      fakes.push_back(empty_strided(
          t.sizes, t.strides.empty() ? contiguous_strides(t.sizes) : t.strides, t.dtype));
    }
    std::vector<ValueType> types;
    for (const TensorMeta& m : def.shape(fakes, a))
      types.push_back({m.dtype, m.device, m.sizes, m.is_view ? m.strides : Shape{}});
    return g->add_node(def, std::move(in), std::move(a), std::move(types));
  }
  Value* value(const char* name, std::vector<Value*> in, Attrs a = {}) {
    return node(name, std::move(in), std::move(a))->output();
  }
};

// Copies with the same layout (a transposed input stays transposed: reshape decides view or copy
// from it).
std::vector<Tensor> clones(const std::vector<Tensor>& ts) {
  std::vector<Tensor> r;
  for (const Tensor& t : ts) {
    Tensor c = empty_like(t);
    c.copy_(t);
    r.push_back(c);
  }
  return r;
}

std::vector<Tensor> run(const Graph& g, const std::vector<Tensor>& inputs) {
  auto exe = backend::make_interpreter_backend()->compile(g);
  return exe->run(inputs, {});
}

void expect_same(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  Tensor x = a.to(DType::f64).contiguous(), y = b.to(DType::f64).contiguous();
  auto xv = x.to_vector<double>(), yv = y.to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_EQ(xv[i], yv[i]) << what << " element " << i;
}

// Runs p as it is and functionalized (both write-back modes) on copies of its inputs; outputs
// and the final inputs must agree. Returns the functional graph (WriteBack::outputs).
FunctionalGraph check_program(const Program& p) {
  p.g->verify();
  std::vector<Tensor> ref_in = clones(p.inputs);
  std::vector<Tensor> ref_out = run(*p.g, ref_in);
  const size_t n_out = p.g->outputs().size();

  FunctionalGraph f = functionalize(*p.g, WriteBack::outputs);
  f.graph->verify();
  for (const Node* n : f.graph->nodes()) {
    EXPECT_FALSE(n->has_side_effects()) << n->op().name << " writes after functionalize:\n"
                                        << f.graph->to_string();
    EXPECT_NE(n->op().category, OpCategory::in_place) << n->op().name;
  }
  EXPECT_EQ(f.graph->outputs().size(), n_out + f.updates.size());
  std::vector<Tensor> f_in = clones(p.inputs);
  std::vector<Tensor> f_out = run(*f.graph, f_in);
  for (size_t i = 0; i < p.inputs.size(); ++i)  // nothing was written
    expect_same(f_in[i], p.inputs[i], "untouched input " + std::to_string(i));
  for (const InputUpdate& u : f.updates) f_in[u.input].copy_(f_out[u.output]);
  for (size_t i = 0; i < n_out; ++i)
    expect_same(f_out[i], ref_out[i], "output " + std::to_string(i));
  for (size_t i = 0; i < p.inputs.size(); ++i)
    expect_same(f_in[i], ref_in[i], "input " + std::to_string(i) + " after write-back");

  // copy_nodes: same interface, writes only in the final copies.
  FunctionalGraph c = functionalize(*p.g, WriteBack::copy_nodes);
  c.graph->verify();
  EXPECT_TRUE(c.updates.empty());
  EXPECT_EQ(c.graph->outputs().size(), n_out);
  bool in_tail = false;
  for (const Node* n : c.graph->nodes()) {
    if (n->has_side_effects()) {
      EXPECT_EQ(n->op().name, "copy_");
      in_tail = true;
    } else if (in_tail) {
      // Only views of the written inputs (outputs that alias them) follow the copies.
      EXPECT_EQ(n->op().category, OpCategory::view) << n->op().name;
    }
  }
  std::vector<Tensor> c_in = clones(p.inputs);
  std::vector<Tensor> c_out = run(*c.graph, c_in);
  for (size_t i = 0; i < n_out; ++i) expect_same(c_out[i], ref_out[i], "copy_nodes output");
  for (size_t i = 0; i < p.inputs.size(); ++i) expect_same(c_in[i], ref_in[i], "copy_nodes input");
  return f;
}

Tensor rnd(Shape s, uint64_t seed) {
  Generator gen(seed);
  return randn(std::move(s), DType::f32, &gen);
}

TEST(Functionalize, InPlaceUpdatesOfInputs) {
  Program p;
  Value* x = p.input(rnd({4, 3}, 1));
  Value* y = p.input(rnd({4, 3}, 2));
  Value* a = p.value("add_", {x, y}, Attrs{{"alpha", 2.0}});  // x += 2y; a is x
  Value* b = p.value("mul", {x, y});                          // reads the new x
  p.value("mul_scalar_", {a}, Attrs{{"other", -0.5}});        // through the result alias
  p.value("relu_", {x});
  Value* c = p.value("sub", {x, b});
  p.g->set_outputs({b, c, a});
  FunctionalGraph f = check_program(p);
  EXPECT_EQ(f.rewritten, 3);
  EXPECT_EQ(f.scatters, 0);
  ASSERT_EQ(f.updates.size(), 1u);
  EXPECT_EQ(f.updates[0].input, 0);
  EXPECT_EQ(f.updates[0].output, 3);
  EXPECT_EQ(f.summary(), "3 writes made functional (0 through a view), 1 inputs written back");
}

TEST(Functionalize, OutputAliasingAnInputStillAliasesWithCopyNodes) {
  Program p;
  Value* x = p.input(rnd({5}, 3));
  Value* a = p.value("fill_", {x}, Attrs{{"value", 1.5}});
  Value* s = p.value(
      "slice", {a},
      Attrs{{"dim", int64_t{0}}, {"start", int64_t{1}}, {"end", int64_t{4}}, {"step", int64_t{1}}});
  p.g->set_outputs({a, s});
  check_program(p);
  FunctionalGraph c = functionalize(*p.g, WriteBack::copy_nodes);
  std::vector<Tensor> in = clones(p.inputs);
  std::vector<Tensor> out = run(*c.graph, in);
  EXPECT_EQ(out[0].impl().storage, in[0].impl().storage);
  EXPECT_EQ(out[1].impl().storage, in[0].impl().storage);
  EXPECT_EQ(out[1].storage_offset(), 1);
}

TEST(Functionalize, BatchNormRunningStatsInTraining) {
  Program p;
  Value* x = p.input(rnd({4, 3, 2, 2}, 4));
  Value* rm = p.input(rnd({3}, 5));
  Value* rv = p.input(add(abs(rnd({3}, 6)), 0.5));
  Value* w = p.input(rnd({3}, 7));
  Value* b = p.input(rnd({3}, 8));
  Attrs train{{"training", true}, {"momentum", 0.1}, {"eps", 1e-5}};
  Attrs eval{{"training", false}, {"momentum", 0.1}, {"eps", 1e-5}};
  Value* y = p.value("batch_norm", {x, rm, rv, w, b}, train);
  Value* y2 = p.value("batch_norm", {x, rm, rv, w, b}, train);  // sees the first update
  Value* z = p.value("batch_norm", {x, rm, rv, w, b}, eval);    // reads the updated stats
  Value* r = p.value("relu", {y});
  p.g->set_outputs({r, y2, z});
  FunctionalGraph f = check_program(p);
  EXPECT_EQ(f.rewritten, 2);  // the inference batch norm writes nothing and stays as it is
  ASSERT_EQ(f.updates.size(), 2u);
  EXPECT_EQ(f.updates[0].input, 1);
  EXPECT_EQ(f.updates[1].input, 2);
  int functional = 0, inference = 0;
  for (const Node* n : f.graph->nodes()) {
    functional += n->op().name == "batch_norm_functional";
    inference += n->op().name == "batch_norm";
  }
  EXPECT_EQ(functional, 2);
  EXPECT_EQ(inference, 1);
}

TEST(Functionalize, WritesThroughViewsOfAnInput) {
  Program p;
  Value* x = p.input(rnd({4, 6}, 9));
  Value* y = p.input(rnd({2, 6}, 10));
  Value* src = p.input(rnd({4}, 11));
  Attrs rows{{"dim", int64_t{0}}, {"start", int64_t{1}}, {"end", int64_t{3}}, {"step", int64_t{1}}};
  Value* s = p.value("slice", {x}, rows);  // rows 1..2 of x
  Value* col = p.value("select", {x}, Attrs{{"dim", int64_t{1}}, {"index", int64_t{2}}});
  p.value("add_", {s, y}, Attrs{{"alpha", 1.0}});  // x[1:3] += y
  Value* col_sum = p.value("mul", {col, col});     // the column after the write
  p.value("fill_", {col}, Attrs{{"value", 3.0}});  // x[:, 2] = 3
  // A view of a view: the first two rows of x^T, written with a broadcast copy.
  Value* t = p.value("permute", {x}, Attrs{{"dims", Shape{1, 0}}});
  Value* t2 = p.value(
      "slice", {t},
      Attrs{{"dim", int64_t{0}}, {"start", int64_t{4}}, {"end", int64_t{6}}, {"step", int64_t{1}}});
  p.value("copy_", {t2, src}, {});
  Value* out = p.value("mul", {x, x});
  p.g->set_outputs({out, s, col_sum, t2});
  FunctionalGraph f = check_program(p);
  EXPECT_EQ(f.rewritten, 3);
  EXPECT_EQ(f.scatters, 3);
  ASSERT_EQ(f.updates.size(), 1u);
  EXPECT_EQ(f.updates[0].input, 0);
}

TEST(Functionalize, WritesIntoAnIntermediateNeedNoWriteBack) {
  Program p;
  Value* x = p.input(rnd({3, 4}, 12));
  Value* c = p.value("clone", {x}, Attrs{{"memory_format", std::string("contiguous")}});
  Value* row = p.value("select", {c}, Attrs{{"dim", int64_t{0}}, {"index", int64_t{1}}});
  p.value("relu_", {row});
  p.value("add_", {c, x}, Attrs{{"alpha", 1.0}});
  p.g->set_outputs({c, row});
  FunctionalGraph f = check_program(p);
  EXPECT_TRUE(f.updates.empty());
  EXPECT_EQ(f.scatters, 1);
}

// reshape is a view when its input's strides allow one and a copy otherwise (eager decides from
// the real strides). Writing into the result of a copying reshape leaves its input alone, and
// writing the input leaves the copy alone; with a contiguous input the same program writes
// through the view.
int count_nodes(const Graph& g, const std::string& name) {
  int n = 0;
  for (const Node* node : g.nodes()) n += node->op().name == name;
  return n;
}

TEST(Functionalize, WriteIntoACopyingReshapeLeavesTheTransposedInputAlone) {
  for (bool transposed : {true, false}) {
    SCOPED_TRACE(transposed ? "transposed input" : "contiguous input");
    Program p;
    Tensor x = transposed ? rnd({4, 3}, 30).transpose(0, 1) : rnd({3, 4}, 30);
    Value* xv = p.input(x);
    Value* r = p.value("reshape", {xv}, Attrs{{"size", Shape{-1}}});
    p.value("relu_", {r});
    p.value("mul_scalar_", {r}, Attrs{{"other", 3.0}});
    Value* m = p.value("mul", {xv, xv});
    p.g->set_outputs({r, m, xv});
    FunctionalGraph f = check_program(p);
    EXPECT_EQ(f.rewritten, 2);
    if (transposed) {  // the writes stay in the copy
      EXPECT_EQ(f.scatters, 0);
      EXPECT_TRUE(f.updates.empty());
      EXPECT_EQ(count_nodes(*f.graph, "as_strided_scatter"), 0) << f.graph->to_string();
    } else {  // through the view into x, which is written back
      EXPECT_EQ(f.scatters, 2);
      ASSERT_EQ(f.updates.size(), 1u);
      EXPECT_EQ(f.updates[0].input, 0);
    }
  }
}

TEST(Functionalize, WriteIntoTheInputLeavesAnEarlierCopyingReshapeAlone) {
  Program p;
  Value* x = p.input(rnd({5, 2}, 31).transpose(0, 1));  // [2, 5], strides [1, 2]
  Value* r = p.value("reshape", {x}, Attrs{{"size", Shape{10}}});
  p.value("mul_scalar_", {x}, Attrs{{"other", -2.0}});
  Value* s = p.value("add", {r, r}, Attrs{{"alpha", 1.0}});  // the copy's old values, doubled
  p.g->set_outputs({r, s, x});
  FunctionalGraph f = check_program(p);
  EXPECT_EQ(f.scatters, 0);
  ASSERT_EQ(f.updates.size(), 1u);
  // r is read from the copy taken before the write, not re-derived from the written x.
  EXPECT_EQ(count_nodes(*f.graph, "reshape"), 1) << f.graph->to_string();
}

// The same programs end to end on the default backend ("cpu": functionalize, the fusions and
// the planned executor) against eager, outputs and argument, values and strides.
TEST(Functionalize, CompiledWritesThroughReshapeEqualEager) {
  auto program = [](const std::vector<Tensor>& in) {
    Tensor a = in[0], b = in[1];
    Tensor r = a.reshape({-1, 4});
    relu_(r);
    Tensor s = b.reshape({-1});
    mul_(b, -2.0);
    Tensor v = mul(a, 0.5).transpose(0, 1);  // an intermediate written through a view
    Tensor row = v.select(0, 1);
    relu_(row);
    return std::vector<Tensor>{r, s, v, row};
  };
  CompiledFunction f = compile(program);  // the default backend
  for (bool transposed : {true, false}) {
    SCOPED_TRACE(transposed ? "transposed arguments" : "contiguous arguments");
    auto arg = [&](uint64_t seed) {
      return transposed ? rnd({4, 3, 2}, seed).transpose(0, 2) : rnd({2, 3, 4}, seed);
    };
    std::vector<Tensor> eager_in{arg(40), arg(41)}, compiled_in{arg(40), arg(41)};
    std::vector<Tensor> want = program(eager_in);
    std::vector<Tensor> got = f(compiled_in);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      expect_same(got[i], want[i], "output " + std::to_string(i));
      EXPECT_EQ(got[i].strides(), want[i].strides()) << "output " << i;
    }
    for (size_t i = 0; i < eager_in.size(); ++i)
      expect_same(compiled_in[i], eager_in[i], "argument " + std::to_string(i));
  }
  EXPECT_EQ(f.stats().compiles, 2);  // a layout change of the arguments retraces
}

TEST(Functionalize, GraphWithoutWritesIsCopied) {
  Program p;
  Value* x = p.input(rnd({3}, 13));
  Value* r = p.value("relu", {x});
  p.g->set_outputs({r});
  FunctionalGraph f = functionalize(*p.g);
  EXPECT_TRUE(f.graph->structurally_equal(*p.g));
  EXPECT_EQ(f.rewritten, 0);
}

TEST(AliasAnalysis, ViewsAndInPlaceResultsAliasTheirInput) {
  Program p;
  Value* x = p.input(rnd({4, 6}, 14));
  Value* y = p.input(rnd({4, 6}, 15));
  Value* s = p.value(
      "slice", {x},
      Attrs{{"dim", int64_t{0}}, {"start", int64_t{0}}, {"end", int64_t{2}}, {"step", int64_t{1}}});
  Value* u = p.value("unsqueeze", {s}, Attrs{{"dim", int64_t{0}}});
  Value* r = p.value("relu", {y});
  Value* w = p.value("relu_", {u});
  p.g->set_outputs({r, w});
  AliasAnalysis a(*p.g);
  EXPECT_EQ(a.aliased_input(s), 0);
  EXPECT_EQ(a.aliased_input(u), 0);
  EXPECT_EQ(a.aliased_input(w), 0);
  EXPECT_EQ(a.aliased_input(y), 1);
  EXPECT_EQ(a.aliased_input(r), -1);
  EXPECT_EQ(a.base_of(u), x);
  EXPECT_TRUE(a.may_alias(s, w));
  EXPECT_FALSE(a.may_alias(x, y));
  EXPECT_EQ(a.mutated_inputs(), std::vector<int>{0});
}

TEST(Functionalize, WriteThroughAViewOfASymbolicBaseIsAClearError) {
  // Symbolic sizes have no fixed scatter window.
  sym::ShapeEnv env;
  SymInt s0 = env.create_symbol(4, sym::Source::size(0, 0), sym::DimPolicy::kDynamic);
  Graph g;
  Value* x = g.add_input(testing::T({s0, 3}), testing::arg(0));
  Value* sel = g.add_node(op("select"), {x}, Attrs{{"dim", int64_t{0}}, {"index", int64_t{0}}},
                          {ValueType{DType::f32, Device::cpu(), {3}, {1}}})
                   ->output();
  g.add_node(op("fill_"), {sel}, Attrs{{"value", 1.0}},
             {ValueType{DType::f32, Device::cpu(), {3}, {1}}});
  g.set_outputs({x});
  try {
    functionalize(g);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[functionalize]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("symbolic"), std::string::npos) << e.what();
  }
}

TEST(Functionalize, RunsFirstInTheCpuBackend) {
  const auto& names = backend::cpu::pass_names();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "functionalize");
  Program p;
  Value* x = p.input(rnd({4, 3}, 16));
  Value* y = p.input(rnd({4, 3}, 17));
  p.value("add_", {x, y}, Attrs{{"alpha", 1.0}});
  Value* m = p.value("mul", {x, y});
  p.g->set_outputs({m});
  FunctionalGraph f = functionalize(*p.g, WriteBack::copy_nodes);
  f.graph.reset();  // the summary outlives the graph (the pass manager moves it out)
  EXPECT_EQ(f.summary(), "1 writes made functional (0 through a view), 1 inputs written back");
  std::unique_ptr<Graph> g = backend::cpu::run_passes(*p.g);
  std::vector<Node*> nodes = g->nodes();
  ASSERT_FALSE(nodes.empty());
  EXPECT_EQ(nodes.back()->op().name, "copy_");
  for (size_t i = 0; i + 1 < nodes.size(); ++i) EXPECT_FALSE(nodes[i]->has_side_effects());
  std::vector<Tensor> ref_in = clones(p.inputs), in = clones(p.inputs);
  std::vector<Tensor> ref = run(*p.g, ref_in);
  std::vector<Tensor> out = backend::make_cpu_backend()->compile(*p.g)->run(in, {});
  expect_same(out[0], ref[0], "cpu output");
  expect_same(in[0], ref_in[0], "cpu written input");
}

// End to end: a training batch norm compiled for the cpu backend (functionalize first, then the
// fusions) updates the running statistics as eager does, call after call.
TEST(Functionalize, CompiledTrainingBatchNormOnTheCpuBackendEqualsEager) {
  auto make_net = [] {
    return nn::make<nn::Sequential>(std::vector<nn::ModulePtr>{
        nn::make<nn::Conv2d>(3, 4, 3, 1, 1), nn::make<nn::BatchNorm2d>(4), nn::make<nn::ReLU>()});
  };
  auto eager = make_net(), compiled = make_net();
  auto ep = eager->named_parameters(), cp = compiled->named_parameters();
  for (size_t i = 0; i < ep.size(); ++i) cp[i].second.copy_(ep[i].second);
  eager->train();
  compiled->train();
  CompileOptions opts;
  opts.backend = "cpu";
  CompiledFunction f(compiled, opts);
  for (uint64_t step = 0; step < 3; ++step) {
    Tensor x = rnd({2, 3, 5, 5}, 100 + step);
    Tensor e = eager->forward(x);
    Tensor c = f({x})[0];
    expect_same(c, e, "step " + std::to_string(step));
  }
  EXPECT_EQ(f.stats().compiles, 1);
  auto eb = eager->named_buffers(), cb = compiled->named_buffers();
  ASSERT_EQ(eb.size(), cb.size());
  for (size_t i = 0; i < eb.size(); ++i) expect_same(cb[i].second, eb[i].second, eb[i].first);
}

}  // namespace
}  // namespace lathe::ir
