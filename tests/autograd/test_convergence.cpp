// Training converges as in PyTorch: 200 SGD steps of examples/small_cnn.h in f64 from the same
// weights on the same batches (tests/oracle/gen_train.py) give the same loss at every step, the
// same final parameters and BatchNorm statistics, and the same predictions and accuracy on a
// held-out set; with eager steps and with compiled ones (lathe::compile of forward + loss, AOT
// autograd, then backward() and the optimizer step), on both compile backends.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>

#include "examples/small_cnn.h"
#include "lathe/core/grad_mode.h"
#include "lathe/io/safetensors.h"
#include "lathe/ops/ops.h"
#include "lathe/optim/optimizer.h"
#include "lathe/trace/compile.h"
#include "tests/oracle/oracle_python.h"

using namespace lathe;

namespace {

// The oracle file, generated on first use (and again when the generator changed).
std::string oracle_file() {
  namespace fs = std::filesystem;
  const std::string script = std::string(LATHE_SOURCE_DIR) + "/tests/oracle/gen_train.py";
  const std::string out_dir = std::string(LATHE_BINARY_DIR) + "/oracle_train";
  const std::string file = out_dir + "/train_small.safetensors";
  if (!fs::exists(file) || fs::last_write_time(file) < fs::last_write_time(script)) {
    std::string cmd = "\"";
    cmd.append(oracle::python_path()).append("\" \"").append(script).append("\" --out \"");
    cmd.append(out_dir).append("\" 2>&1");
    if (std::system(cmd.c_str()) != 0) return "";
  }
  return file;
}

class Convergence : public ::testing::TestWithParam<std::string> {};

TEST_P(Convergence, SmallCnnFollowsPyTorchLossCurve) {
  LATHE_REQUIRE_ORACLE_PYTHON();
  const std::string file = oracle_file();
  ASSERT_FALSE(file.empty()) << "tests/oracle/gen_train.py failed";
  io::SafetensorsFile f(file);
  auto model = examples::small_cnn();
  model->to(DType::f64);
  std::map<std::string, Tensor> weights;
  for (const std::string& key : f.keys())
    if (key.rfind("weight.", 0) == 0) weights[key.substr(7)] = f.get(key);
  model->load_state_dict(weights);
  model->train();
  for (Tensor& p : model->parameters()) p.set_requires_grad(true);
  optim::SGDOptions o;
  o.lr = 0.05;
  o.momentum = 0.9;
  o.weight_decay = 1e-4;
  optim::SGD opt(model->parameters(), o);

  // The training step's forward and loss: eager, or compiled once for every step.
  const std::string mode = GetParam();
  std::function<Tensor(const Tensor&, const Tensor&)> loss_of;
  std::shared_ptr<CompiledFunction> compiled;
  if (mode == "eager") {
    loss_of = [&](const Tensor& x, const Tensor& y) { return cross_entropy(model->forward(x), y); };
  } else {
    CompileOptions co;
    co.backend = mode.substr(std::string("compile@").size());
    co.name = "train_step";
    nn::Module* m = model.get();
    compiled = std::make_shared<CompiledFunction>(compile(
        [m](const std::vector<Tensor>& a) { return cross_entropy(m->forward(a[0]), a[1]); }, co));
    loss_of = [&](const Tensor& x, const Tensor& y) {
      Tensor loss = (*compiled)({x, y})[0];
      EXPECT_EQ(loss.grad_fn_name(), "compiled_backward");
      return loss;
    };
  }

  const std::vector<double> want = f.get("loss").to_vector<double>();
  ASSERT_EQ(want.size(), 200u);
  double worst_first20 = 0, worst = 0;
  for (size_t s = 0; s < want.size(); ++s) {
    opt.zero_grad();
    Tensor loss = loss_of(f.get("x." + std::to_string(s)), f.get("y." + std::to_string(s)));
    loss.backward();
    opt.step();
    const double err = std::abs(loss.item() - want[s]);
    double& worst_here = s < 20 ? worst_first20 : worst;
    worst_here = std::max(worst_here, err);
    // The issue asks for 1e-3 over the first 20 steps; in f64 both sides agree to rounding
    // (measured: 1e-16 over the first 20 steps, 2e-15 by step 200), so the bounds are far tighter.
    ASSERT_LE(err, s < 20 ? 1e-12 : 1e-9)
        << "step " << s << ": " << loss.item() << " vs " << want[s];
  }
  char figures[96];
  std::snprintf(figures, sizeof figures, "first 20 steps %.3g, steps 20-199 %.3g", worst_first20,
                worst);
  RecordProperty("worst_loss_error", figures);
  if (compiled) {  // one trace served every step: the compiled path really ran
    EXPECT_EQ(compiled->stats().compiles, 1);
    EXPECT_EQ(compiled->stats().hits, 199);
  }
  // The task is learnt: the last 20 steps' mean loss is well below the first 20 steps'.
  double first = 0, last = 0;
  for (size_t s = 0; s < 20; ++s) first += want[s], last += want[want.size() - 1 - s];
  EXPECT_LT(last, 0.75 * first);

  const auto state = model->state_dict();
  for (const std::string& key : f.keys()) {
    if (key.rfind("final.", 0) != 0) continue;
    const std::string name = key.substr(6);
    ASSERT_TRUE(state.count(name)) << name;
    auto a = state.at(name).to_vector<double>(), b = f.get(key).to_vector<double>();
    ASSERT_EQ(a.size(), b.size()) << name;
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-9) << name << " " << i;
  }

  // The same predictions on the held-out set, hence the same final accuracy (not 1: the task
  // is noisy enough that the comparison means something).
  model->eval();
  NoGradGuard no_grad;
  const Tensor test_y = f.get("test_y");
  const Tensor logits = model->forward(f.get("test_x"));
  auto got = logits.to_vector<double>(), ref = f.get("test_logits").to_vector<double>();
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-9) << "logit " << i;
  const double accuracy = mean(eq(argmax(logits, 1), test_y).to(DType::f64)).item();
  const double want_accuracy = f.get("test_accuracy").item();
  EXPECT_EQ(accuracy, want_accuracy);
  EXPECT_GT(want_accuracy, 0.7);
  EXPECT_LT(want_accuracy, 1.0);
}

INSTANTIATE_TEST_SUITE_P(EagerAndCompiled, Convergence,
                         ::testing::Values("eager", "compile@cpu", "compile@interpreter"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '@') c = '_';
                           return n;
                         });

}  // namespace
