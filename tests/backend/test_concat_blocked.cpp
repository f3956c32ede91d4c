// Concat without copies: the concat_blocked pass (a channel concat of convolutions that
// plan_layouts keeps blocked runs on the blocked values, no reorders around it) and the planned
// executor writing the convolutions straight into the concat's slices when the layout allows
// (batch 1), checked on a Fire-like graph through the whole pipeline against the interpreter on
// the original graph, and on squeezenet at batch 1 and 2 against eager.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "lathe/backend/backend.h"
#include "lathe/backend/cpu/concat_blocked.h"
#include "lathe/backend/cpu/cpu_backend.h"
#include "lathe/backend/cpu/executor.h"
#include "lathe/core/grad_mode.h"
#include "lathe/core/random.h"
#include "lathe/ir/graph.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"
#include "lathe/trace/compile.h"
#include "tests/backend/backend_test_util.h"
#include "tests/models/small_models.h"

using namespace lathe;

namespace {

Tensor rnd(const std::vector<int64_t>& shape, uint64_t seed) {
  Generator g(seed);
  return randn(to_shape(shape), DType::f32, &g);
}

using lathe::testing::max_rel_diff;

struct Built {
  std::unique_ptr<ir::Graph> g = std::make_unique<ir::Graph>();
  std::vector<Tensor> inputs;
  backend::cpu::GraphConstants constants;
  ir::Value* input(const Tensor& t, bool constant) {
    inputs.push_back(t);
    constants.push_back(constant ? t : Tensor());
    return g->add_input(ir::ValueType::of(t),
                        ir::InputSource{constant ? ir::InputSource::Kind::captured
                                                 : ir::InputSource::Kind::argument,
                                        static_cast<int>(inputs.size() - 1), ""});
  }
  ir::Value* node(const char* op, std::vector<ir::Value*> in, Attrs a) {
    const OpDef& def = OpRegistry::global().get(op);
    std::vector<Tensor> fakes;
    for (ir::Value* v : in) fakes.push_back(v ? ir::fake_tensor(v->type()) : Tensor());
    std::vector<TensorMeta> m = def.shape(fakes, a);
    ir::ValueType t;
    t.dtype = m[0].dtype;
    t.sizes = m[0].sizes;
    t.strides = m[0].strides;
    // Pointwise rules leave the layout open; tracing records the input's, as here.
    if (t.strides.empty() && !in.empty() && in[0]->type().sizes == t.sizes)
      t.strides = in[0]->type().strides;
    return g->add_node(def, std::move(in), std::move(a), {t})->output();
  }
  ir::Value* conv_relu(ir::Value* x, int64_t cin, int64_t cout, int64_t k, uint64_t seed) {
    ir::Value* w = input(mul(rnd({cout, cin, k, k}, seed), 0.3), true);
    ir::Value* b = input(rnd({cout}, seed + 100), true);
    Attrs a{{"stride", Shape{1, 1}},
            {"padding", Shape{k / 2, k / 2}},
            {"dilation", Shape{1, 1}},
            {"groups", int64_t{1}}};
    return node("relu", {node("conv2d", {x, w, b}, a)}, Attrs{});
  }
};

// Two Fire modules: squeeze -> (expand 1x1, expand 3x3) -> cat; the first concat feeds the next
// squeeze (blocked all the way), the second a max pool (read channels-last).
Built fire_graph(int64_t batch, int64_t k = 1) {  // k scales every channel count
  Built b;
  ir::Value* x = b.input(rnd({batch, 16 * k, 9, 9}, 1).to_channels_last(), false);
  ir::Value* s1 = b.conv_relu(x, 16 * k, 8 * k, 1, 2);
  ir::Value* c1 =
      b.node("cat", {b.conv_relu(s1, 8 * k, 16 * k, 1, 3), b.conv_relu(s1, 8 * k, 16 * k, 3, 4)},
             Attrs{{"dim", int64_t{1}}});
  ir::Value* s2 = b.conv_relu(c1, 32 * k, 8 * k, 1, 5);
  ir::Value* c2 =
      b.node("cat", {b.conv_relu(s2, 8 * k, 8 * k, 1, 6), b.conv_relu(s2, 8 * k, 24 * k, 3, 7)},
             Attrs{{"dim", int64_t{1}}});
  ir::Value* p = b.node("max_pool2d", {c2},
                        Attrs{{"kernel", Shape{3, 3}},
                              {"stride", Shape{2, 2}},
                              {"padding", Shape{0, 0}},
                              {"dilation", Shape{1, 1}},
                              {"ceil_mode", true}});
  b.g->set_outputs({p});
  b.g->verify();
  return b;
}

// Sets LATHE_CPU_BLOCK (plan_layouts' block) for one scope.
class ScopedBlock {
 public:
  explicit ScopedBlock(int block) {
    if (const char* e = std::getenv("LATHE_CPU_BLOCK")) old_ = e;
    setenv("LATHE_CPU_BLOCK", std::to_string(block).c_str(), 1);
  }
  ~ScopedBlock() {
    if (old_)
      setenv("LATHE_CPU_BLOCK", old_->c_str(), 1);
    else
      unsetenv("LATHE_CPU_BLOCK");
  }

 private:
  std::optional<std::string> old_;
};

int count(const ir::Graph& g, const std::string& op) {
  int n = 0;
  for (const ir::Node* node : g.nodes()) n += node->op().name == op;
  return n;
}

TEST(ConcatBlocked, FireModulesConcatenateBlockedValuesAndWriteIntoTheSlices) {
  for (auto [block, batch] : {std::pair{8, 1}, {8, 2}, {16, 1}, {16, 2}}) {
    SCOPED_TRACE("block " + std::to_string(block));
    ScopedBlock scoped(block);
    Built b = fire_graph(batch, block / 8);
    backend::cpu::GraphConstants constants = b.constants;
    auto without = backend::cpu::run_passes(*b.g, constants, {"concat_blocked"});
    EXPECT_EQ(count(*without, "from_blocked"), 4);  // two into each concat
    constants = b.constants;
    auto g = backend::cpu::run_passes(*b.g, constants);
    EXPECT_EQ(count(*g, "conv2d_blocked"), 6);
    EXPECT_EQ(count(*g, "cat"), 2);
    for (const ir::Node* n : g->nodes()) {
      if (n->op().name != "cat") continue;
      for (const ir::Value* v : n->inputs()) {
        EXPECT_EQ(v->producer()->op().name, "conv2d_blocked");
      }
    }
    EXPECT_EQ(count(*g, "max_pool2d_blocked"), 1);  // the pool reads the blocked concat
    EXPECT_EQ(count(*g, "from_blocked"), 1);        // after the pool (the graph output) only
    EXPECT_EQ(count(*g, "to_blocked"), 1);          // the graph input only

    auto want = backend::create_backend("interpreter")->compile(*b.g)->run(b.inputs, {});
    std::vector<Tensor> in = b.inputs;
    for (size_t i = in.size(); i < g->inputs().size(); ++i) in.push_back(constants.at(i));
    auto exe = backend::cpu::make_planned_executable(*g);
    for (int call = 0; call < 3; ++call) {  // records, then runs the plan twice
      auto got = exe->run(in, {});
      ASSERT_EQ(got.size(), 1u);
      EXPECT_LT(max_rel_diff(got[0], want[0]), 1e-5) << "batch " << batch << " call " << call;
    }
    // At batch 1 a slice of the blocked concat is contiguous: both concats are written in
    // place. At batch 2 the slices are strided: the concats copy.
    EXPECT_EQ(exe->stats().concats_in_place, batch == 1 ? 2u : 0u) << "batch " << batch;
  }
}

TEST(ConcatBlocked, SqueezenetEqualsEagerAtBatchOneAndTwo) {
  auto spec = test_models::small_model("squeezenet1_1", 3, 256);
  spec->module->eval();
  NoGradGuard no_grad;
  CompileOptions o;
  o.backend = "cpu";
  auto f = compile(spec->module, o);
  models::InputOptions io;
  io.image_size = 64;
  for (int64_t batch : {1, 2}) {
    for (uint64_t seed : {1, 2}) {
      auto in = models::default_inputs("squeezenet1_1", batch, seed, io);
      auto want = spec->forward(in);
      auto got = f(in);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_LT(max_rel_diff(got[i], want[i]), 1e-4) << "batch " << batch << " seed " << seed;
    }
  }
}

}  // namespace
