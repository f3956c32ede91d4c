// A toy second backend, built here without touching lathe/ops: its own kernel table (the
// generic KernelTable of lathe/backend/kernel_table.h, as the cpu backend's), its own kernels
// for add and relu, one backend-private op ("toy.add_relu", registered by the backend and made
// by its one pass), compiled and run through the Backend interface and the backend registry.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <unordered_map>

#include "../ir/ir_test_util.h"
#include "lathe/backend/backend.h"
#include "lathe/backend/kernel_table.h"
#include "lathe/ops/ops.h"

namespace lathe::backend {
namespace {

using namespace ir::testing;

// What the toy backend knows about running an op: a loop over contiguous f32 buffers.
struct ToyKernel {
  void (*run)(const float* a, const float* b, float* out, int64_t n) = nullptr;
};
using ToyKernelTable = KernelTable<ToyKernel>;

std::atomic<int> toy_kernel_calls{0};

void toy_add(const float* a, const float* b, float* out, int64_t n) {
  ++toy_kernel_calls;
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
void toy_relu(const float* a, const float*, float* out, int64_t n) {
  ++toy_kernel_calls;
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] > 0 ? a[i] : 0;
}
void toy_add_relu(const float* a, const float* b, float* out, int64_t n) {
  ++toy_kernel_calls;
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i] > 0 ? a[i] + b[i] : 0;
}

// The backend's private op: add then relu of two same-shaped f32 tensors. Its eager kernel (what
// the interpreter would run) is written with ops.
const OpDef& add_relu_op() {
  static const OpDef& def = OpRegistry::global().add(OpDef{
      "toy.add_relu",
      2,
      [](TensorList in, const Attrs&) {
        LATHE_CHECK(in[0].sizes() == in[1].sizes(), "[toy.add_relu] needs equal shapes");
        TensorMeta m;
        m.sizes = in[0].sizes();
        m.dtype = in[0].dtype();
        m.device = in[0].device();
        return std::vector<TensorMeta>{m};
      },
      [](TensorList in, const Attrs&, const std::vector<TensorMeta>&) {
        return std::vector<Tensor>{relu(add(in[0], in[1]))};
      },
      {},
      {}});
  return def;
}

const ToyKernelTable& toy_kernels() {
  static const ToyKernelTable table = [] {
    ToyKernelTable t;
    t.entry(OpRegistry::global().get("add")).run = toy_add;
    t.entry(OpRegistry::global().get("relu")).run = toy_relu;
    t.entry(add_relu_op()).run = toy_add_relu;
    return t;
  }();
  return table;
}

struct ToyStep {
  const ToyKernel* kernel;
  int a, b, out;  // slots; b = -1 for a unary op
};

class ToyExecutable : public Executable {
 public:
  ToyExecutable(std::vector<ToyStep> steps, int num_slots, std::vector<Shape> sizes,
                std::vector<int> outputs)
      : steps_(std::move(steps)), num_slots_(num_slots), sizes_(std::move(sizes)),
        outputs_(std::move(outputs)) {}
  std::vector<Tensor> run(std::span<const Tensor> inputs, SymbolValues) override {
    std::vector<Tensor> slots(num_slots_);
    for (size_t i = 0; i < inputs.size(); ++i) slots[i] = inputs[i].contiguous();
    for (const ToyStep& s : steps_) {
      slots[s.out] = empty(sizes_[s.out], DType::f32);
      const float* b = s.b >= 0 ? slots[s.b].data<float>() : nullptr;
      s.kernel->run(slots[s.a].data<float>(), b, slots[s.out].data<float>(),
                    slots[s.out].numel());
    }
    std::vector<Tensor> result;
    for (int o : outputs_) result.push_back(slots[o]);
    return result;
  }

 private:
  std::vector<ToyStep> steps_;
  int num_slots_;
  std::vector<Shape> sizes_;
  std::vector<int> outputs_;
};

class ToyBackend : public Backend {
 public:
  std::string name() const override { return "toy"; }
  // One pass (add -> relu with the add used once becomes toy.add_relu), then one step per node
  // from the toy's kernel table; an op without an entry is an error naming it.
  std::unique_ptr<Executable> compile(const ir::Graph& g) override {
    const OpDef* relu_op = &OpRegistry::global().get("relu");
    const OpDef* add_op = &OpRegistry::global().get("add");
    std::unordered_map<const ir::Value*, int> slot;
    std::vector<Shape> sizes;
    auto new_slot = [&](const ir::Value* v) {
      slot[v] = static_cast<int>(sizes.size());
      sizes.push_back(v->type().sizes);
      return slot[v];
    };
    for (const ir::Value* v : g.inputs()) new_slot(v);
    std::vector<ToyStep> steps;
    for (const ir::Node* n : g.nodes()) {
      const OpDef* op = &n->op();
      const ir::Value* a = n->inputs()[0];
      if (op == relu_op && a->producer() && &a->producer()->op() == add_op &&
          a->users().size() == 1 && !slot.count(a)) {
        op = &add_relu_op();  // fused: the add's step was deferred below
        n = a->producer();
        a = n->inputs()[0];
      } else if (op == add_op && n->output()->users().size() == 1 &&
                 &n->output()->users()[0]->op() == relu_op &&
                 std::find(g.outputs().begin(), g.outputs().end(), n->output()) ==
                     g.outputs().end()) {
        continue;  // the relu below takes it
      }
      const ToyKernel* k = toy_kernels().find(op);
      LATHE_CHECK(k && k->run, "[toy] no kernel for '", op->name, "'");
      const int b = n->inputs().size() > 1 ? slot.at(n->inputs()[1]) : -1;
      const int a_slot = slot.at(a);
      const ir::Value* out = op == &add_relu_op() ? n->output()->users()[0]->output() : n->output();
      steps.push_back({k, a_slot, b, new_slot(out)});
      fused_ += op == &add_relu_op();
    }
    std::vector<int> outputs;
    for (const ir::Value* v : g.outputs()) outputs.push_back(slot.at(v));
    return std::make_unique<ToyExecutable>(std::move(steps), static_cast<int>(sizes.size()),
                                           std::move(sizes), std::move(outputs));
  }
  static inline int fused_ = 0;
};

TEST(ToyBackend, CompilesAndRunsThroughTheBackendInterface) {
  static const bool registered = [] {
    register_backend("toy", [] { return std::make_unique<ToyBackend>(); });
    return true;
  }();
  ASSERT_TRUE(registered);
  // y = relu(x + w); z = relu(y) + x
  ir::Graph g;
  ir::Value* x = g.add_input(T({2, 3}), arg(0));
  ir::Value* w = g.add_input(T({2, 3}), arg(1));
  ir::Value* s = g.add_node(op("add"), {x, w}, Attrs{{"alpha", 1.0}}, {T({2, 3})})->output();
  ir::Value* y = g.add_node(op("relu"), {s}, {}, {T({2, 3})})->output();
  ir::Value* r = g.add_node(op("relu"), {y}, {}, {T({2, 3})})->output();
  ir::Value* z = g.add_node(op("add"), {r, x}, Attrs{{"alpha", 1.0}}, {T({2, 3})})->output();
  g.set_outputs({y, z});
  g.verify();

  std::unique_ptr<Backend> backend = create_backend("toy");
  std::unique_ptr<Executable> exe = backend->compile(g);
  EXPECT_EQ(ToyBackend::fused_, 1);  // add -> relu became toy.add_relu

  Tensor xs = from_vector<float>({-1, 2, -3, 4, -5, 6}, {2, 3});
  Tensor ws = from_vector<float>({0.5f, -3, 1, 1, 1, -7}, {2, 3});
  toy_kernel_calls = 0;
  Tensor in[2] = {xs, ws};
  std::vector<Tensor> out = exe->run(in, {});
  EXPECT_EQ(toy_kernel_calls.load(), 3);  // add_relu, relu, add: the toy's kernels, not eager
  ASSERT_EQ(out.size(), 2u);
  Tensor want_y = relu(add(xs, ws));
  EXPECT_EQ(out[0].to_vector<float>(), want_y.to_vector<float>());
  EXPECT_EQ(out[1].to_vector<float>(), add(relu(want_y), xs).to_vector<float>());

  // The private op runs on the interpreter too (through its eager kernel).
  ir::Graph h;
  ir::Value* a = h.add_input(T({2, 3}), arg(0));
  ir::Value* b = h.add_input(T({2, 3}), arg(1));
  h.set_outputs({h.add_node(add_relu_op(), {a, b}, {}, {T({2, 3})})->output()});
  std::vector<Tensor> ref = create_backend("interpreter")->compile(h)->run(in, {});
  EXPECT_EQ(ref[0].to_vector<float>(), want_y.to_vector<float>());

  // An op the toy has no kernel for is an error naming it.
  ir::Graph m;
  ir::Value* p = m.add_input(T({2, 3}), arg(0));
  m.set_outputs({m.add_node(op("neg"), {p}, {}, {T({2, 3})})->output()});
  try {
    backend->compile(m);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[toy] no kernel for 'neg'"), std::string::npos);
  }
}

}  // namespace
}  // namespace lathe::backend
