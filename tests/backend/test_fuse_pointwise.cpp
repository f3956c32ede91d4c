// The fuse_pointwise pass and its kernel: a pointwise program equals the eager ops it stands for
// (every instruction, broadcast and single-element inputs, other layouts, empty and one-element
// tensors, sizes big enough to run on every thread), its text form round-trips and rejects bad
// programs, and the pass fuses what it may (graph in, graph out, verified, run before / after
// on random data) and leaves what it may not.
#include <gtest/gtest.h>

#include <cmath>

#include "lathe/backend/backend.h"
#include "lathe/backend/cpu/cpu_backend.h"
#include "lathe/backend/cpu/fuse_pointwise.h"
#include "lathe/core/random.h"
#include "lathe/ir/graph.h"
#include "lathe/kernels/pointwise_program.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"

using namespace lathe;
using kernels::PointwiseProgram;

namespace {

Tensor rnd(const std::vector<int64_t>& shape, uint64_t seed) {
  Generator g(seed);
  return randn(to_shape(shape), DType::f32, &g);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    m = std::max(m, std::isnan(x[i]) || std::isnan(y[i]) ? INFINITY : std::abs(x[i] - y[i]));
  }
  return m;
}

Tensor run(const std::string& text, const std::vector<Tensor>& in, const Tensor& like) {
  Tensor out = empty_strided(like.sizes(), like.strides(), DType::f32);
  kernels::run_pointwise(PointwiseProgram::parse(text, static_cast<int>(in.size())), in, out);
  return out;
}

TEST(PointwiseProgram, EveryInstructionEqualsTheEagerOp) {
  Tensor a = mul(rnd({3, 37}, 1), 3.0), b = add(mul(rnd({3, 37}, 2), 2.0), 0.1);
  struct Case {
    const char* program;
    Tensor want;
    double tol;
  };
  const std::vector<Case> cases{
      {"in 0; in 1; add %0 %1 1", add(a, b), 0},
      {"in 0; in 1; add %0 %1 0.5", add(a, b, 0.5), 1e-6},
      {"in 0; in 1; sub %0 %1 2", sub(a, b, 2.0), 1e-6},
      {"in 0; in 1; mul %0 %1", mul(a, b), 0},
      {"in 0; in 1; div %0 %1", div(a, b), 0},
      {"in 0; in 1; maximum %0 %1", maximum(a, b), 0},
      {"in 0; in 1; minimum %0 %1", minimum(a, b), 0},
      {"in 0; scale %0 -1.5", mul(a, -1.5), 0},
      {"in 0; neg %0", neg(a), 0},
      {"in 0; relu %0", relu(a), 0},
      {"in 0; sigmoid %0", sigmoid(a), 2e-6},
      {"in 0; tanh %0", tanh(a), 2e-6},
      // 1e-6 relative of values up to about e^9 (x log2 e is rounded to f32 first).
      {"in 0; exp %0", exp(a), 1e-6 * std::exp(max_abs_diff(a, mul(a, 0.0)))},
      {"in 0; gelu_erf %0", gelu(a), 2e-6},
      {"in 0; gelu_tanh %0", gelu(a, "tanh"), 2e-6},
      {"in 0; clamp %0 -1 0.5", clamp(a, -1.0, 0.5), 0},
      {"in 0; hardswish %0", hardswish(a), 1e-6},
      {"in 0; hardsigmoid %0", hardsigmoid(a), 1e-6},
      {"const 2.5; in 0; mul %0 %1", mul(a, 2.5), 0},
  };
  for (const Case& c : cases) {
    Tensor got = run(c.program, {a, b}, a);
    EXPECT_LE(max_abs_diff(got, c.want), c.tol) << c.program;
  }
}

TEST(PointwiseProgram, BroadcastScalarLayoutsAndSizes) {
  const char* p = "in 0; in 1; mul %0 %1; in 2; add %2 %3 1; gelu_erf %4";
  // Channels-last activations with a per-channel scale (broadcast) and a 0-d shift.
  Tensor x = rnd({2, 8, 5, 6}, 3).to_channels_last();
  Tensor w = rnd({8, 1, 1}, 4), s = rnd({}, 5);
  Tensor got = run(p, {x, w, s}, x);
  EXPECT_TRUE(got.is_channels_last());
  EXPECT_LE(max_abs_diff(got, gelu(add(mul(x, w), s))), 2e-6);
  // An input in another layout than the output (transposed) is read right.
  Tensor y = rnd({6, 5}, 6).transpose(0, 1), z = rnd({5, 6}, 7);
  EXPECT_LE(max_abs_diff(run(p, {y, z, s}, z), gelu(add(mul(y, z), s))), 2e-6);
  // Empty, one element, and big enough for every thread (and a ragged last tile).
  for (int64_t n : {0, 1, 255, 257, 300001}) {
    Tensor u = rnd({n}, 8), v = rnd({n}, 9);
    EXPECT_LE(max_abs_diff(run(p, {u, v, s}, u), gelu(add(mul(u, v), s))), 2e-6) << n;
  }
}

TEST(PointwiseProgram, TextFormRoundTripsAndBadProgramsAreClearErrors) {
  const std::string text = "in 0; in 1; add %0 %1 0.25; clamp %2 -1 1; const 3; mul %3 %4";
  PointwiseProgram p = PointwiseProgram::parse(text, 2);
  EXPECT_EQ(p.num_inputs, 2);
  EXPECT_EQ(p.code.size(), 6u);
  EXPECT_EQ(PointwiseProgram::parse(p.to_string(), 2).to_string(), p.to_string());
  auto error_of = [](const std::string& t, int n) -> std::string {
    try {
      PointwiseProgram::parse(t, n);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of("in 0; frobnicate %0", 1).find("unknown instruction 'frobnicate'"),
            std::string::npos);
  EXPECT_NE(error_of("in 0; relu %1", 1).find("not defined before it"), std::string::npos);
  EXPECT_NE(error_of("in 3; relu %0", 2).find("reads input 3 of 2"), std::string::npos);
  EXPECT_NE(error_of("in 0; add %0", 1).find("register"), std::string::npos);
  EXPECT_NE(error_of("", 1).find("empty"), std::string::npos);
}

// ---- the pass ----

struct Built {
  std::unique_ptr<ir::Graph> g = std::make_unique<ir::Graph>();
  std::vector<Tensor> inputs;
  ir::Value* input(const Tensor& t) {
    inputs.push_back(t);
    return g->add_input(
        ir::ValueType::of(t),
        ir::InputSource{ir::InputSource::Kind::argument, static_cast<int>(inputs.size() - 1), ""});
  }
  // A node typed as tracing types it: the rule's result, the layout of input 0 when open.
  ir::Value* node(const char* op, std::vector<ir::Value*> in, Attrs a = {}) {
    const OpDef& def = OpRegistry::global().get(op);
    std::vector<Tensor> fakes;
    for (ir::Value* v : in) fakes.push_back(ir::fake_tensor(v->type()));
    std::vector<TensorMeta> m = def.shape(fakes, a);
    ir::ValueType t;
    t.dtype = m[0].dtype;
    t.sizes = m[0].sizes;
    t.strides = m[0].strides.empty() ? in[0]->type().strides : m[0].strides;
    return g->add_node(def, std::move(in), std::move(a), {t})->output();
  }
};

std::vector<std::string> op_names(const ir::Graph& g) {
  std::vector<std::string> names;
  for (const ir::Node* n : g.nodes()) names.push_back(n->op().name);
  return names;
}

std::vector<Tensor> run_graph(const ir::Graph& g, const std::vector<Tensor>& in) {
  return backend::create_backend("interpreter")->compile(g)->run(in, {});
}

TEST(FusePointwisePass, FusesAChainWithBroadcastInputs) {
  Built b;
  ir::Value* x = b.input(rnd({4, 16, 5, 5}, 1).to_channels_last());
  ir::Value* scale = b.input(rnd({16, 1, 1}, 2));
  ir::Value* shift = b.input(rnd({16, 1, 1}, 3));
  ir::Value* t = b.node("mul", {x, scale});
  t = b.node("add", {t, shift}, Attrs{{"alpha", 1.0}});
  t = b.node("gelu", {t}, Attrs{{"approximate", std::string("tanh")}});
  t = b.node("sub", {t, x}, Attrs{{"alpha", 0.5}});
  b.g->set_outputs({t});
  backend::cpu::FusePointwiseStats s;
  auto out = backend::cpu::fuse_pointwise(*b.g, &s);
  out->verify();
  EXPECT_EQ(op_names(*out), (std::vector<std::string>{"pointwise_fused"}));
  EXPECT_EQ(s.groups, 1);
  EXPECT_EQ(s.nodes, 4);
  EXPECT_EQ(out->nodes()[0]->inputs().size(), 3u);  // x read once
  Tensor got = run_graph(*out, b.inputs)[0], want = run_graph(*b.g, b.inputs)[0];
  EXPECT_TRUE(got.is_channels_last());
  EXPECT_LE(max_abs_diff(got, want), 2e-6);
  // Through the planned executor too (records, then runs the plan).
  auto exe = backend::create_backend("cpu")->compile(*b.g);
  for (int call = 0; call < 2; ++call)
    EXPECT_LE(max_abs_diff(exe->run(b.inputs, {})[0], want), 2e-6) << call;
}

TEST(FusePointwisePass, LeavesValuesReadElsewhereBroadcastIntermediatesAndOtherDtypes) {
  Built b;
  ir::Value* x = b.input(rnd({3, 8}, 1));
  ir::Value* y = b.input(rnd({8}, 2));
  ir::Value* r = b.node("relu", {y});                           // [8]: broadcast into [3, 8]
  ir::Value* s = b.node("add", {x, r}, Attrs{{"alpha", 1.0}});  // [3, 8]
  ir::Value* e = b.node("exp", {s});                            // read twice below
  ir::Value* o1 = b.node("mul", {e, x});
  ir::Value* o2 = b.node("neg", {e});
  ir::Value* d = b.input(rnd({3, 8}, 3).to(DType::f64));
  ir::Value* f64 = b.node("tanh", {b.node("neg", {d})});  // f64: not fused
  b.g->set_outputs({o1, o2, f64});
  backend::cpu::FusePointwiseStats st;
  auto out = backend::cpu::fuse_pointwise(*b.g, &st);
  out->verify();
  // relu stays (its [8] result broadcasts); add + exp fuse (exp's two readers are outside);
  // mul and neg stay single; the f64 pair stays.
  EXPECT_EQ(st.groups, 1);
  EXPECT_EQ(st.nodes, 2);
  EXPECT_EQ(op_names(*out),
            (std::vector<std::string>{"relu", "pointwise_fused", "mul", "neg", "neg", "tanh"}));
  auto got = run_graph(*out, b.inputs), want = run_graph(*b.g, b.inputs);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_LE(max_abs_diff(got[i], want[i]), 1e-5) << i;
}

// The fused node computes at the root's place: a write between a member and the root (a graph
// functionalize could not rewrite) would be read across, so such a group stays apart. Found by
// CompileFuzz (seed 20261249: sigmoid of a view read after a mul_ through it).
TEST(FusePointwisePass, LeavesGroupsThatSpanAWrite) {
  Built b;
  ir::Value* x = b.input(rnd({6}, 1));
  ir::Value* y = b.node("neg", {x});
  b.node("relu_", {x});  // writes x between neg and add
  ir::Value* z = b.node("add", {y, x}, Attrs{{"alpha", 1.0}});
  b.g->set_outputs({z});
  backend::cpu::FusePointwiseStats s;
  auto out = backend::cpu::fuse_pointwise(*b.g, &s);
  EXPECT_EQ(s.groups, 0);
  EXPECT_EQ(op_names(*out), (std::vector<std::string>{"neg", "relu_", "add"}));
}

TEST(FusePointwisePass, IsInThePipelineAndCanBeDisabled) {
  const auto& names = backend::cpu::pass_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "fuse_pointwise"), names.end());
  Built b;
  ir::Value* x = b.input(rnd({64}, 1));
  b.g->set_outputs({b.node("sigmoid", {b.node("neg", {x})})});
  EXPECT_EQ(op_names(*backend::cpu::run_passes(*b.g)),
            (std::vector<std::string>{"pointwise_fused"}));
  EXPECT_EQ(op_names(*backend::cpu::run_passes(*b.g, {"fuse_pointwise"})),
            (std::vector<std::string>{"neg", "sigmoid"}));
}

}  // namespace
