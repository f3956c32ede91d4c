// The optimizers and schedulers against torch.optim (tests/oracle/gen_optim.py): the same
// gradients give the same parameters after every step, the same state, the same lr schedule.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "lathe/core/random.h"
#include "lathe/io/safetensors.h"
#include "lathe/ops/ops.h"
#include "lathe/optim/lr_scheduler.h"
#include "lathe/optim/optimizer.h"
#include "tests/oracle/oracle_python.h"

using namespace lathe;
using namespace lathe::optim;

namespace {

std::string data_file() {
  return std::string(LATHE_BINARY_DIR) + "/oracle_optim/optim.safetensors";
}

void generate() {
  namespace fs = std::filesystem;
  const std::string script = std::string(LATHE_SOURCE_DIR) + "/tests/oracle/gen_optim.py";
  if (fs::exists(data_file()) && fs::last_write_time(data_file()) > fs::last_write_time(script))
    return;
  std::string cmd = "\"";
  cmd.append(oracle::python_path()).append("\" \"").append(script).append("\" --out \"");
  cmd.append(std::string(LATHE_BINARY_DIR) + "/oracle_optim").append("\" 2>&1");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) d = std::max(d, std::abs(x[i] - y[i]));
  return d;
}

std::unique_ptr<Optimizer> make(const nlohmann::json& c, std::vector<Tensor> params) {
  const std::string kind = c["kind"];
  if (kind == "sgd") {
    SGDOptions o;
    o.lr = c["lr"];
    o.momentum = c.value("momentum", 0.0);
    o.dampening = c.value("dampening", 0.0);
    o.weight_decay = c.value("weight_decay", 0.0);
    o.nesterov = c.value("nesterov", false);
    return std::make_unique<SGD>(std::move(params), o);
  }
  AdamOptions o;
  o.lr = c["lr"];
  o.beta1 = c.value("beta1", 0.9);
  o.beta2 = c.value("beta2", 0.999);
  o.eps = c.value("eps", 1e-8);
  o.weight_decay = c.value("weight_decay", 0.0);
  if (kind == "adamw") return std::make_unique<AdamW>(std::move(params), o);
  return std::make_unique<Adam>(std::move(params), o);
}

}  // namespace

TEST(OptimOracle, UpdatesAndStateMatchTorch) {
  LATHE_REQUIRE_ORACLE_PYTHON();
  ASSERT_NO_FATAL_FAILURE(generate());
  io::SafetensorsFile f(data_file());
  auto meta = nlohmann::json::parse(f.metadata().at("configs"));
  const int steps = meta["steps"];
  int checked = 0;
  for (const auto& [name, cfg] : meta["optimizers"].items()) {
    SCOPED_TRACE(name);
    std::vector<Tensor> params;
    for (int k = 0; k < 2; ++k) {
      params.push_back(f.get(name + ".p0." + std::to_string(k)).clone());
      params.back().set_requires_grad(true);
    }
    auto opt = make(cfg, params);
    for (int s = 0; s < steps; ++s) {
      for (int k = 0; k < 2; ++k)
        params[k].set_grad(f.get(name + ".grad." + std::to_string(s) + "." + std::to_string(k)));
      opt->step();
      for (int k = 0; k < 2; ++k) {
        const Tensor want = f.get(name + ".p." + std::to_string(s) + "." + std::to_string(k));
        EXPECT_LT(max_abs_diff(params[k], want), 1e-12) << "step " << s << " param " << k;
        ++checked;
      }
    }
    const OptimizerStateDict sd = opt->state_dict();
    for (int k = 0; k < 2; ++k) {
      for (const char* key : {"momentum_buffer", "exp_avg", "exp_avg_sq", "step"}) {
        const std::string torch_key = name + ".state." + std::to_string(k) + "." + key;
        ASSERT_EQ(f.contains(torch_key), sd.state.count(k) && sd.state.at(k).count(key))
            << torch_key;
        if (f.contains(torch_key)) {
          EXPECT_LT(max_abs_diff(sd.state.at(k).at(key), f.get(torch_key)), 1e-12) << torch_key;
        }
      }
    }
    opt->zero_grad(false);
    EXPECT_EQ(max_abs_diff(params[0].grad(), zeros(params[0].sizes(), DType::f64)), 0.0);
    opt->zero_grad();
    EXPECT_FALSE(params[0].grad().defined());
  }
  EXPECT_EQ(checked, 6 * 5 * 2);
}

TEST(OptimOracle, SchedulersMatchTorch) {
  LATHE_REQUIRE_ORACLE_PYTHON();
  ASSERT_NO_FATAL_FAILURE(generate());
  io::SafetensorsFile f(data_file());
  auto meta = nlohmann::json::parse(f.metadata().at("configs"));
  for (const auto& [name, cfg] : meta["schedulers"].items()) {
    SCOPED_TRACE(name);
    Tensor p = zeros({1}, DType::f64);
    SGDOptions o;
    o.lr = cfg["lr"];
    SGD opt({p}, o);
    std::unique_ptr<LRScheduler> sched;
    if (cfg["kind"] == "step")
      sched = std::make_unique<StepLR>(opt, cfg["step_size"], cfg["gamma"]);
    else
      sched = std::make_unique<CosineAnnealingLR>(opt, cfg["t_max"], cfg["eta_min"]);
    const std::vector<double> want = f.get(name + ".lr").to_vector<double>();
    for (size_t e = 0; e < want.size(); ++e) {
      sched->step();
      EXPECT_NEAR(opt.lr(), want[e], 1e-12) << "epoch " << e + 1;
    }
  }
}

TEST(Optim, StateDictRoundTripContinuesIdentically) {
  auto run = [](Optimizer& opt, std::vector<Tensor>& ps, int steps, uint64_t seed) {
    for (int s = 0; s < steps; ++s) {
      for (size_t k = 0; k < ps.size(); ++k) {
        Generator gen(seed + 10 * s + k);
        ps[k].set_grad(randn(ps[k].sizes(), DType::f64, &gen));
      }
      opt.step();
    }
  };
  Generator gen(3);
  std::vector<Tensor> a{randn({4, 3}, DType::f64, &gen)}, b{a[0].clone()};
  AdamOptions o;
  o.lr = 0.05;
  o.weight_decay = 0.01;
  AdamW first(a, o);
  run(first, a, 3, 100);
  b[0].copy_(a[0]);
  AdamW second(b, o);
  second.load_state_dict(first.state_dict());
  run(first, a, 2, 200);
  run(second, b, 2, 200);
  EXPECT_EQ(max_abs_diff(a[0], b[0]), 0.0);
}

TEST(Optim, ErrorsAreClear) {
  SGDOptions o;
  o.nesterov = true;
  EXPECT_THROW(SGD({zeros({2})}, o), Error);
  EXPECT_THROW(SGD({arange(3)}, SGDOptions{}), Error);
}
