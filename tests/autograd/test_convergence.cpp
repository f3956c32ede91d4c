// Training converges as in PyTorch: 20 SGD steps of examples/small_cnn.h in f64 from the same
// weights on the same batches (tests/oracle/gen_train.py) give the same loss at every step and
// the same final parameters and BatchNorm statistics.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "examples/small_cnn.h"
#include "lathe/io/safetensors.h"
#include "lathe/ops/ops.h"
#include "lathe/optim/optimizer.h"
#include "tests/oracle/oracle_python.h"

using namespace lathe;

TEST(Convergence, SmallCnnFollowsPyTorchLossCurve) {
  LATHE_REQUIRE_ORACLE_PYTHON();
  namespace fs = std::filesystem;
  const std::string script = std::string(LATHE_SOURCE_DIR) + "/tests/oracle/gen_train.py";
  const std::string out_dir = std::string(LATHE_BINARY_DIR) + "/oracle_train";
  const std::string file = out_dir + "/train_small.safetensors";
  if (!fs::exists(file) || fs::last_write_time(file) < fs::last_write_time(script)) {
    std::string cmd = "\"";
    cmd.append(oracle::python_path()).append("\" \"").append(script).append("\" --out \"");
    cmd.append(out_dir).append("\" 2>&1");
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
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
  const std::vector<double> want = f.get("loss").to_vector<double>();
  ASSERT_EQ(want.size(), 20u);
  for (size_t s = 0; s < want.size(); ++s) {
    opt.zero_grad();
    Tensor loss = cross_entropy(model->forward(f.get("x." + std::to_string(s))),
                                f.get("y." + std::to_string(s)));
    loss.backward();
    opt.step();
    EXPECT_NEAR(loss.item(), want[s], 1e-10) << "step " << s;
  }
  EXPECT_LT(want.back(), want.front());  // the task is learnt
  const auto state = model->state_dict();
  for (const std::string& key : f.keys()) {
    if (key.rfind("final.", 0) != 0) continue;
    const std::string name = key.substr(6);
    ASSERT_TRUE(state.count(name)) << name;
    auto a = state.at(name).to_vector<double>(), b = f.get(key).to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-10) << name << " " << i;
  }
}
