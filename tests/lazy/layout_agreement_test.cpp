// Layout agreement on the model zoo (issue 11): eager, lathe::compile (trace once) and the lazy
// device give every output the same strides, and every op result recorded lazily shows the
// strides eager's result of the same op has (dims of one element excepted). The op-by-op check
// over the oracle table is Torch/LayoutAgreement in tests/oracle/test_ops_oracle.cpp.
//
// Graph values keep strides (the recorder fills them from the one layout rule, output_strides)
// because the cpu backend's passes read them at compile time (plan_layouts, fold_batch_norm); they
// decide nothing at run time, where kernels allocate by the same rule from the real strides.
// LayoutAgreementModel.TracedGraphRecordsEagersLayout shows the recorded strides of every node of
// compile's graph are the layouts eager makes at run time, so no graph value fixes a layout of its
// own.
#include <gtest/gtest.h>

#include <optional>
#include <sstream>

#include "lathe/backend/backend.h"
#include "lathe/ir/graph.h"
#include "lathe/lazy/lazy.h"
#include "lathe/models/registry.h"
#include "lathe/ops/op_def.h"
#include "lathe/trace/compile.h"
#include "lazy_test_util.h"

using namespace lathe;
using lathe::lazy_test::small_inputs;
using lathe::lazy_test::to_device;

namespace {

// Strides of the dims with more than one element (-1 for the others, whose strides are free).
std::vector<int64_t> significant_strides(const Tensor& t) {
  std::vector<int64_t> r;
  for (int64_t d = 0; d < t.dim(); ++d)
    r.push_back(t.sizes()[d].hint() > 1 ? t.strides()[d].hint() : -1);
  return r;
}

// One op call: its name and its results' significant strides.
struct OpLayout {
  std::string op;
  std::vector<std::vector<int64_t>> strides;
  bool operator==(const OpLayout&) const = default;
};

std::string describe(const OpLayout& l) {
  std::ostringstream os;
  os << l.op << ":";
  for (const auto& st : l.strides) os << " " << detail::str(st);
  return os.str();
}

OpLayout layout_of(const OpDef& op, const std::vector<Tensor>& outs) {
  OpLayout l{op.name, {}};
  for (const Tensor& t : outs) l.strides.push_back(significant_strides(t));
  return l;
}

// Eager: the top-level op calls (nested dispatches inside kernels are not recorded).
thread_local std::vector<OpLayout>* tls_eager_log = nullptr;

class LogMode : public DispatchMode {
 public:
  std::vector<Tensor> dispatch(const OpDef& op, TensorList inputs, const Attrs& attrs,
                               std::vector<TensorMeta>&& metas) override {
    ModeGuard eager(nullptr);
    std::vector<Tensor> out = op.kernel(inputs, attrs, metas);
    for (int i : op.mutated_inputs)
      if (i < static_cast<int>(inputs.size()) && inputs[i].defined()) inputs[i].bump_version();
    tls_eager_log->push_back(layout_of(op, out));
    return out;
  }
};

class LayoutAgreementModel : public ::testing::TestWithParam<std::string> {};

// The graphs compile hands to the backend "layout_capture" (the interpreter after noting, for each
// node in order, its op and its outputs' recorded strides).
std::vector<OpLayout>* captured_graph_ops = nullptr;

class LayoutCaptureBackend : public backend::Backend {
 public:
  std::string name() const override { return "layout_capture"; }
  std::unique_ptr<backend::Executable> compile(const ir::Graph& graph) override {
    for (const ir::Node* n : graph.nodes()) {
      OpLayout l{n->op().name, {}};
      for (const ir::Value* v : n->outputs()) {
        const ir::ValueType& t = v->type();
        std::vector<int64_t> st;
        for (size_t d = 0; d < t.sizes.size(); ++d)
          st.push_back(t.sizes[d].hint() > 1 && d < t.strides.size() ? t.strides[d].hint() : -1);
        l.strides.push_back(st);
      }
      captured_graph_ops->push_back(std::move(l));
    }
    return backend::create_backend("interpreter")->compile(graph);
  }
};

void register_layout_capture_backend() {
  static const bool registered =
      (backend::register_backend("layout_capture",
                                 [] { return std::make_unique<LayoutCaptureBackend>(); }),
       true);
  (void)registered;
}

}  // namespace

// Strides are recorded on every graph value, but only as what the layout rule gives at run time:
// for each node of compile's graph, the strides eager's same op call produced.
TEST_P(LayoutAgreementModel, TracedGraphRecordsEagersLayout) {
  const std::string name = GetParam();
  auto spec = test_models::small_model(name, 5, 64);
  spec->module->eval();
  const std::vector<Tensor> inputs = small_inputs(name, 2, 6);

  std::vector<OpLayout> eager_ops;
  tls_eager_log = &eager_ops;
  LogMode log_mode;
  std::optional<ModeGuard> logging(&log_mode);
  spec->forward(inputs);
  logging.reset();
  tls_eager_log = nullptr;

  register_layout_capture_backend();
  std::vector<OpLayout> graph_ops;
  captured_graph_ops = &graph_ops;
  CompileOptions options;
  options.backend = "layout_capture";
  auto f = compile([&](const std::vector<Tensor>& x) { return spec->forward(x); }, options);
  f(inputs);
  captured_graph_ops = nullptr;

  // The traced graph may drop nodes eager ran (dead code); each graph node is matched with the
  // next eager call of the same op.
  ASSERT_GT(graph_ops.size(), 5u) << name;
  size_t k = 0;
  int mismatches = 0;
  for (const OpLayout& g : graph_ops) {
    while (k < eager_ops.size() && eager_ops[k].op != g.op) ++k;
    ASSERT_LT(k, eager_ops.size())
        << name << ": graph node " << describe(g) << " has no eager call left to match";
    if (!(eager_ops[k] == g) && mismatches++ < 5)
      ADD_FAILURE() << name << ": graph records " << describe(g) << ", eager made "
                    << describe(eager_ops[k]);
    ++k;
  }
  EXPECT_EQ(mismatches, 0) << name;
}

TEST_P(LayoutAgreementModel, EagerCompileAndLazyAgree) {
  const std::string name = GetParam();
  auto spec = test_models::small_model(name, 5, 64);
  spec->module->eval();
  const std::vector<Tensor> inputs = small_inputs(name, 2, 6);

  std::vector<OpLayout> eager_ops;
  tls_eager_log = &eager_ops;
  LogMode log_mode;
  std::optional<ModeGuard> logging(&log_mode);
  const std::vector<Tensor> eager = spec->forward(inputs);
  logging.reset();
  tls_eager_log = nullptr;
  ASSERT_GT(eager_ops.size(), 5u);

  std::vector<Tensor> traced;  // the fake outputs of the trace
  auto f = compile([&](const std::vector<Tensor>& x) {
    std::vector<Tensor> out = spec->forward(x);
    for (const Tensor& t : out)
      if (!t.has_storage()) traced.push_back(t);
    return out;
  });
  const std::vector<Tensor> compiled = f(inputs);

  std::vector<OpLayout> lazy_ops;
  lazy::testing::set_record_observer([&](const OpDef& op, const std::vector<Tensor>& outs) {
    lazy_ops.push_back(layout_of(op, outs));
  });
  spec->module->to(Device::lazy());
  std::vector<Tensor> lz = spec->forward(to_device(inputs, Device::lazy()));
  lazy::testing::set_record_observer(nullptr);

  ASSERT_EQ(compiled.size(), eager.size());
  ASSERT_EQ(traced.size(), eager.size());
  ASSERT_EQ(lz.size(), eager.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    const auto want = significant_strides(eager[i]);
    EXPECT_EQ(significant_strides(traced[i]), want) << name << " output " << i << " (traced)";
    EXPECT_EQ(significant_strides(compiled[i]), want) << name << " output " << i << " (compile)";
    EXPECT_EQ(significant_strides(lz[i]), want) << name << " output " << i << " (lazy pending)";
    lz[i].raw_data();  // syncs
    EXPECT_EQ(significant_strides(lz[i]), want) << name << " output " << i << " (lazy synced)";
  }
  // Every intermediate result: the same ops in the same order, with the same layouts.
  ASSERT_EQ(lazy_ops.size(), eager_ops.size()) << name;
  int mismatches = 0;
  for (size_t k = 0; k < eager_ops.size() && mismatches < 5; ++k) {
    if (lazy_ops[k] == eager_ops[k]) continue;
    ++mismatches;
    ADD_FAILURE() << name << " op " << k << ": eager " << describe(eager_ops[k]) << ", lazy "
                  << describe(lazy_ops[k]);
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, LayoutAgreementModel, ::testing::ValuesIn(models::model_names()),
                         [](const auto& info) { return info.param; });
