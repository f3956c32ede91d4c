// The cpu backend's planned executor: the arena layout never overlaps live buffers, results equal
// the interpreter's on hand-built graphs and on the ten zoo models (first call records, later
// calls run the plan), results handed out are never arena memory, in-place writes reach the
// caller, each shape gets its own plan, and concurrent runs are independent.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "../ir/ir_test_util.h"
#include "lathe/backend/backend.h"
#include "lathe/backend/cpu/cpu_backend.h"
#include "lathe/backend/cpu/executor.h"
#include "lathe/backend/cpu/memory_plan.h"
#include "lathe/core/random.h"
#include "lathe/ops/ops.h"
#include "lathe/trace/compile.h"
#include "tests/models/small_models.h"

namespace lathe::backend {
namespace {

using ir::Graph;
using ir::Value;
using ir::ValueType;
using namespace ir::testing;

void expect_same(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  EXPECT_EQ(got.to_vector<double>(), want.to_vector<double>()) << what;
}

bool shares_memory(const Tensor& a, const Tensor& b) {
  return a.has_storage() && b.has_storage() && a.impl().storage == b.impl().storage;
}

// ---- the memory plan ----

TEST(ArenaPlan, OverlappingLifetimesNeverShareBytesAndDisjointOnesReuse) {
  Generator gen(5);
  std::vector<cpu::BufferLifetime> bufs;
  Tensor r = rand({3, 60}, DType::f64, &gen);
  auto v = r.to_vector<double>();
  for (int i = 0; i < 60; ++i) {
    int first = static_cast<int>(v[i] * 40);
    bufs.push_back({static_cast<size_t>(1 + v[60 + i] * 5000), first,
                    first + static_cast<int>(v[120 + i] * 8)});
  }
  cpu::ArenaLayout l = cpu::plan_arena(bufs);
  size_t total = 0;
  for (size_t a = 0; a < bufs.size(); ++a) {
    total += bufs[a].bytes;
    EXPECT_EQ(l.offsets[a] % cpu::kArenaAlignment, 0u);
    EXPECT_LE(l.offsets[a] + bufs[a].bytes, l.bytes);
    for (size_t b = a + 1; b < bufs.size(); ++b) {
      bool live_together = !(bufs[a].last < bufs[b].first || bufs[b].last < bufs[a].first);
      bool overlap = l.offsets[a] < l.offsets[b] + bufs[b].bytes &&
                     l.offsets[b] < l.offsets[a] + bufs[a].bytes;
      EXPECT_FALSE(live_together && overlap) << "buffers " << a << " and " << b;
    }
  }
  EXPECT_LT(l.bytes, total);  // short lifetimes over 40 steps: memory is reused
}

// ---- hand-built graphs ----

// x -> linear -> gelu -> mul(x2) -> add(bias) -> softmax -> layer_norm, plus a view chain and
// an output that is a view of an intermediate.
struct Mlp {
  Graph g;
  Mlp() {
    Value* x = g.add_input(T({4, 8}), arg(0));
    Value* w = g.add_input(T({16, 8}), cap(1, "w"));
    Value* b = g.add_input(T({16}), cap(2, "b"));
    Value* lw = g.add_input(T({16}), cap(3, "ln.w"));
    Value* lb = g.add_input(T({16}), cap(4, "ln.b"));
    Value* l = g.add_node(op("linear"), {x, w, b}, {}, {T({4, 16})})->output();
    Value* ge =
        g.add_node(op("gelu"), {l}, Attrs{{"approximate", std::string("none")}}, {T({4, 16})})
            ->output();
    Value* m = g.add_node(op("mul"), {ge, l}, {}, {T({4, 16})})->output();
    Value* a = g.add_node(op("add"), {m, b}, Attrs{{"alpha", 1.0}}, {T({4, 16})})->output();
    Value* n = g.add_node(op("neg"), {a}, {}, {T({4, 16})})->output();
    Value* s = g.add_node(op("softmax"), {n}, Attrs{{"dim", int64_t{-1}}}, {T({4, 16})})->output();
    Value* ln = g.add_node(op("layer_norm"), {s, lw, lb},
                           Attrs{{"normalized_shape", to_shape({16})}, {"eps", 1e-5}}, {T({4, 16})})
                    ->output();
    Value* r = g.add_node(op("relu"), {ln}, {}, {T({4, 16})})->output();
    ValueType vt = T({64});
    Value* v = g.add_node(op("view"), {r}, Attrs{{"size", to_shape({64})}}, {vt})->output();
    g.set_outputs({v, s});
  }
  static std::vector<Tensor> inputs(uint64_t seed) {
    Generator gen(seed);
    return {randn({4, 8}, DType::f32, &gen), randn({16, 8}, DType::f32, &gen),
            randn({16}, DType::f32, &gen), randn({16}, DType::f32, &gen),
            randn({16}, DType::f32, &gen)};
  }
};

TEST(PlannedExecutor, EqualsTheInterpreterAndPlansTheIntermediates) {
  Mlp net;
  net.g.verify();
  auto ref = create_backend("interpreter")->compile(net.g);
  auto exe = cpu::make_planned_executable(net.g);
  std::vector<std::vector<Tensor>> kept;
  for (uint64_t seed : {1, 2, 3, 4}) {
    auto in = Mlp::inputs(seed);
    auto want = ref->run(in, {});
    auto got = exe->run(in, {});
    ASSERT_EQ(got.size(), 2u);
    for (size_t i = 0; i < got.size(); ++i) expect_same(got[i], want[i], "output");
    kept.push_back(got);
    kept.push_back(want);
  }
  // Results of earlier calls were not overwritten by later ones.
  for (size_t c = 0; c < kept.size(); c += 2)
    for (size_t i = 0; i < 2; ++i) expect_same(kept[c][i], kept[c + 1][i], "kept output");
  // Outputs of different calls never share memory.
  EXPECT_FALSE(shares_memory(kept[0][0], kept[2][0]));
  EXPECT_FALSE(shares_memory(kept[0][1], kept[2][1]));
  cpu::ExecutorStats st = exe->stats();
  EXPECT_EQ(st.plans, 1u);
  EXPECT_EQ(st.steps, 9u);
  // linear, gelu, mul, add, neg and layer_norm live in the arena (softmax and relu feed outputs);
  // add writes over mul's result and neg over add's.
  EXPECT_EQ(st.arena_values, 6u);
  EXPECT_GE(st.in_place, 2u);
  EXPECT_LT(st.arena_bytes, st.unplanned_bytes);
}

// A fused convolution whose residual dies at it writes its output over the residual (the sum
// post-op reads it in place: OpDef::in_place_input) instead of copying the residual first.
TEST(PlannedExecutor, FusedConvWritesOverItsDyingResidual) {
  Graph g;
  Generator gen(11);
  std::vector<Tensor> in{randn({1, 16, 8, 8}, DType::f32, &gen).to_channels_last(),
                         randn({16, 16, 3, 3}, DType::f32, &gen),
                         randn({16, 16, 3, 3}, DType::f32, &gen)};
  Value* x = g.add_input(ValueType::of(in[0]), arg(0));
  Value* w1 = g.add_input(ValueType::of(in[1]), cap(1, "w1"));
  Value* w2 = g.add_input(ValueType::of(in[2]), cap(2, "w2"));
  auto conv = [&](Value* w, Value* residual) {
    Attrs a{{"stride", Shape{1, 1}},
            {"padding", Shape{1, 1}},
            {"dilation", Shape{1, 1}},
            {"groups", int64_t{1}},
            {"eps", 0.0},
            {"act", std::string("relu")},
            {"act_min", 0.0},
            {"act_max", 0.0},
            {"act2", std::string("none")},
            {"act2_min", 0.0},
            {"act2_max", 0.0}};
    std::vector<Value*> ins{x, w, nullptr, nullptr, nullptr, nullptr, nullptr, residual};
    std::vector<Tensor> fakes;
    for (Value* v : ins) fakes.push_back(v ? ir::fake_tensor(v->type()) : Tensor());
    std::vector<TensorMeta> m = op("conv2d_fused").shape(fakes, a);
    ValueType t;
    t.dtype = m[0].dtype;
    t.sizes = m[0].sizes;
    t.strides = m[0].strides;
    return g.add_node(op("conv2d_fused"), std::move(ins), std::move(a), {t})->output();
  };
  Value* r = conv(w1, nullptr);
  Value* y = conv(w2, r);
  Value* z = g.add_node(op("neg"), {y}, {}, {y->type()})->output();
  g.set_outputs({z});
  g.verify();
  auto ref = create_backend("interpreter")->compile(g);
  auto exe = cpu::make_planned_executable(g);
  for (int call = 0; call < 3; ++call)
    expect_same(exe->run(in, {})[0], ref->run(in, {})[0], "call " + std::to_string(call));
  cpu::ExecutorStats st = exe->stats();
  // y over r, its residual (neg's output is the graph's: never in the arena).
  EXPECT_EQ(st.in_place, 1u);
  EXPECT_EQ(st.arena_values, 2u);
}

// conv(r) + r: the dying residual is also the convolution's input, so the output may not be
// written over it (the convolution would read what it already overwrote).
TEST(PlannedExecutor, FusedConvNeverWritesOverAResidualItAlsoReadsAsInput) {
  Graph g;
  Generator gen(12);
  std::vector<Tensor> in{randn({2, 16, 6, 6}, DType::f32, &gen).to_channels_last(),
                         randn({16, 16, 3, 3}, DType::f32, &gen),
                         randn({16, 16, 3, 3}, DType::f32, &gen)};
  Value* x = g.add_input(ValueType::of(in[0]), arg(0));
  Value* w1 = g.add_input(ValueType::of(in[1]), cap(1, "w1"));
  Value* w2 = g.add_input(ValueType::of(in[2]), cap(2, "w2"));
  auto conv = [&](Value* input, Value* w, Value* residual) {
    Attrs a{{"stride", Shape{1, 1}},
            {"padding", Shape{1, 1}},
            {"dilation", Shape{1, 1}},
            {"groups", int64_t{1}},
            {"eps", 0.0},
            {"act", std::string("none")},
            {"act_min", 0.0},
            {"act_max", 0.0},
            {"act2", std::string("relu")},
            {"act2_min", 0.0},
            {"act2_max", 0.0}};
    std::vector<Value*> ins{input, w, nullptr, nullptr, nullptr, nullptr, nullptr, residual};
    std::vector<Tensor> fakes;
    for (Value* v : ins) fakes.push_back(v ? ir::fake_tensor(v->type()) : Tensor());
    std::vector<TensorMeta> m = op("conv2d_fused").shape(fakes, a);
    ValueType t;
    t.dtype = m[0].dtype;
    t.sizes = m[0].sizes;
    t.strides = m[0].strides;
    return g.add_node(op("conv2d_fused"), std::move(ins), std::move(a), {t})->output();
  };
  Value* r = conv(x, w1, nullptr);
  Value* y = conv(r, w2, r);
  Value* z = g.add_node(op("neg"), {y}, {}, {y->type()})->output();
  g.set_outputs({z});
  g.verify();
  auto ref = create_backend("interpreter")->compile(g);
  auto exe = cpu::make_planned_executable(g);
  for (int call = 0; call < 3; ++call)
    expect_same(exe->run(in, {})[0], ref->run(in, {})[0], "call " + std::to_string(call));
  EXPECT_EQ(exe->stats().in_place, 0u);
}

// layer_norm, softmax and log_softmax (OpDef::in_place_input 0: one thread reads each row before
// writing it) write over their input when it dies at them; a row op whose input is read later
// gets its own buffer. Results equal the interpreter's exactly either way.
TEST(PlannedExecutor, RowOpsWriteOverTheirDyingInput) {
  for (bool input_read_later : {false, true}) {
    Graph g;
    Value* x = g.add_input(T({6, 32}), arg(0));
    Value* lw = g.add_input(T({32}), cap(1, "ln.w"));
    Value* lb = g.add_input(T({32}), cap(2, "ln.b"));
    Value* n = g.add_node(op("neg"), {x}, {}, {T({6, 32})})->output();
    Value* ln = g.add_node(op("layer_norm"), {n, lw, lb},
                           Attrs{{"normalized_shape", to_shape({32})}, {"eps", 1e-5}}, {T({6, 32})})
                    ->output();
    Value* s = g.add_node(op("softmax"), {ln}, Attrs{{"dim", int64_t{-1}}}, {T({6, 32})})->output();
    Value* ls =
        g.add_node(op("log_softmax"), {s}, Attrs{{"dim", int64_t{-1}}}, {T({6, 32})})->output();
    if (input_read_later)  // neg's result is still needed after layer_norm
      ls = g.add_node(op("add"), {ls, n}, Attrs{{"alpha", 1.0}}, {T({6, 32})})->output();
    Value* r = g.add_node(op("relu"), {ls}, {}, {T({6, 32})})->output();
    g.set_outputs({r});
    g.verify();
    auto ref = create_backend("interpreter")->compile(g);
    auto exe = cpu::make_planned_executable(g);
    for (uint64_t seed : {1, 2, 3}) {
      Generator gen(seed);
      std::vector<Tensor> in{randn({6, 32}, DType::f32, &gen), randn({32}, DType::f32, &gen),
                             randn({32}, DType::f32, &gen)};
      expect_same(exe->run(in, {})[0], ref->run(in, {})[0], "seed " + std::to_string(seed));
    }
    // Dying input: layer_norm over neg's buffer, softmax over layer_norm's, log_softmax over
    // softmax's (relu's output is the graph's). Read later: layer_norm gets its own buffer and
    // add writes over log_softmax's.
    EXPECT_EQ(exe->stats().in_place, 3u) << "input read later: " << input_read_later;
    EXPECT_EQ(exe->stats().arena_values, input_read_later ? 5u : 4u);
  }
}

TEST(PlannedExecutor, EachShapeGetsItsOwnPlan) {
  // One dynamic trace serves every size; the executor plans each concrete size once.
  CompileOptions o;
  o.backend = "cpu";
  o.dynamic = DynamicPolicy::kDynamic;
  auto f = compile(
      [](const std::vector<Tensor>& a) {
        return std::vector<Tensor>{sum(mul(exp(relu(a[0])), a[0])), neg(a[0])};
      },
      o);
  Generator gen(3);
  for (int64_t n : {5, 9, 5, 33, 9, 33}) {
    Tensor x = randn({n}, DType::f32, &gen);
    auto got = f({x});
    Tensor want = sum(mul(exp(relu(x)), x));
    EXPECT_NEAR(got[0].item(), want.item(), 1e-4);
    expect_same(got[1], neg(x), "neg");
  }
  EXPECT_EQ(f.stats().compiles, 1);
}

TEST(PlannedExecutor, InPlaceWritesReachTheCaller) {
  Graph g;
  Value* x = g.add_input(T({6}), arg(0));
  Value* buf = g.add_input(T({6}), cap(1, "buf"));
  Value* r = g.add_node(op("relu"), {x}, {}, {T({6})})->output();
  Value* e = g.add_node(op("exp"), {r}, {}, {T({6})})->output();
  Value* a = g.add_node(op("add_"), {buf, e}, Attrs{{"alpha", 1.0}}, {T({6})})->output();
  g.set_outputs({a, x});
  g.verify();
  auto exe = cpu::make_planned_executable(g);
  Tensor xin = randn({6});
  Tensor b = zeros({6});
  Tensor want = exp(relu(xin));
  for (int call = 1; call <= 3; ++call) {
    uint64_t v0 = b.impl().storage->version();
    auto out = exe->run(std::vector<Tensor>{xin, b}, {});
    EXPECT_TRUE(out[0].is_same(b) || shares_memory(out[0], b));
    EXPECT_TRUE(out[1].is_same(xin));
    EXPECT_GT(b.impl().storage->version(), v0);
    EXPECT_LT(amax(abs(sub(b, mul(want, static_cast<double>(call))))).item(), 1e-5);
  }
}

TEST(PlannedExecutor, ConcurrentRunsAreIndependent) {
  Mlp net;
  auto exe = cpu::make_planned_executable(net.g);
  auto ref = create_backend("interpreter")->compile(net.g);
  std::vector<std::vector<Tensor>> ins, want;
  for (uint64_t seed : {7, 8}) {
    ins.push_back(Mlp::inputs(seed));
    want.push_back(ref->run(ins.back(), {}));
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        auto out = exe->run(ins[t], {});
        for (size_t k = 0; k < out.size(); ++k)
          if (out[k].to_vector<float>() != want[t][k].to_vector<float>()) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(PlannedExecutor, ErrorsNameTheNode) {
  Mlp net;
  auto exe = cpu::make_planned_executable(net.g);
  auto in = Mlp::inputs(1);
  in[0] = randn({4, 8}, DType::f64);
  try {
    exe->run(in, {});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("[cpu.executor] input 0 (arg0) is f64[4,8]", 0), 0u)
        << e.what();
  }
}

// ---- the zoo: the executor against the interpreter on the same optimized graph ----

// Compiles each graph with both the interpreter and the planned executor and checks on every
// call that they agree bit for bit (they run the same kernels in the same order).
class TwinExecutable final : public Executable {
 public:
  explicit TwinExecutable(const ir::Graph& g)
      : ref_(create_backend("interpreter")->compile(g)), exe_(cpu::make_planned_executable(g)) {}
  std::vector<Tensor> run(std::span<const Tensor> inputs, SymbolValues symbols) override {
    auto want = ref_->run(inputs, symbols);
    auto got = exe_->run(inputs, symbols);
    EXPECT_EQ(got.size(), want.size());
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
      expect_same(got[i], want[i], "output " + std::to_string(i));
    last_stats = exe_->stats();
    return got;
  }
  static inline cpu::ExecutorStats last_stats;

 private:
  std::unique_ptr<Executable> ref_;
  std::unique_ptr<cpu::PlannedExecutable> exe_;
};

class TwinBackend final : public Backend {
 public:
  std::string name() const override { return "executor_twin"; }
  std::unique_ptr<Executable> compile(const ir::Graph& graph) override {
    return std::make_unique<TwinExecutable>(*cpu::run_passes(graph));
  }
};

class ExecutorZoo : public ::testing::TestWithParam<std::string> {};

TEST_P(ExecutorZoo, EqualsTheInterpreter) {
  static bool registered = [] {
    register_backend("executor_twin", [] { return std::make_unique<TwinBackend>(); });
    return true;
  }();
  (void)registered;
  const std::string name = GetParam();
  auto spec = test_models::small_model(name, 3, 256);
  CompileOptions o;
  o.backend = "executor_twin";
  auto f = compile(spec->module, o);
  for (uint64_t seed : {1, 2, 3}) {
    models::InputOptions io;
    io.image_size = name == "vit" ? 0 : 64;
    io.seq_len = 12;
    if (name == "bert") io.bert = test_models::small_bert(256);
    if (name == "vit") io.vit = test_models::small_vit();
    auto in = models::default_inputs(name, 2, seed, io);
    auto got = f(in);
    ASSERT_FALSE(got.empty());
  }
  EXPECT_EQ(f.stats().compiles, 1);
  EXPECT_GT(TwinExecutable::last_stats.arena_values, 0u) << name;
}

INSTANTIATE_TEST_SUITE_P(Zoo, ExecutorZoo,
                         ::testing::Values("resnet18", "resnet50", "resnext50_32x4d", "alexnet",
                                           "vgg16", "mobilenet_v2", "mnasnet1_0", "squeezenet1_1",
                                           "bert", "vit"));

}  // namespace
}  // namespace lathe::backend
