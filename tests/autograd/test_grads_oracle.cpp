// Gradients against PyTorch's (tests/oracle/gen_grads.py): op cases in f32 (rtol 1e-4 of the
// largest gradient) and zoo models at small sizes in f64 (CNNs in train mode).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "lathe/io/safetensors.h"
#include "lathe/models/registry.h"
#include "lathe/ops/ops.h"
#include "tests/oracle/oracle_python.h"

using namespace lathe;
using V = std::vector<Tensor>;

namespace {

std::string dir() { return std::string(LATHE_BINARY_DIR) + "/oracle_grads"; }

// Runs the generator unless `file` is newer than the scripts it comes from.
void generate(const std::string& file, const std::string& what) {
  namespace fs = std::filesystem;
  const std::string src = std::string(LATHE_SOURCE_DIR) + "/tests/oracle/";
  const fs::path out = dir() + "/" + file;
  if (fs::exists(out)) {
    auto t = fs::last_write_time(out);
    if (t > fs::last_write_time(src + "gen_grads.py") &&
        t > fs::last_write_time(src + "ref_models.py") &&
        t > fs::last_write_time(src + "gen_models.py"))
      return;
  }
  std::string cmd = "\"";
  cmd.append(oracle::python_path()).append("\" \"").append(src + "gen_grads.py");
  cmd.append("\" --out \"").append(dir()).append("\" ").append(what).append(" 2>&1");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

double relative_error(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.shape(), want.shape());
  if (got.shape() != want.shape()) return INFINITY;
  auto a = got.to_vector<double>(), b = want.to_vector<double>();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  if (std::isnan(diff)) return INFINITY;
  return scale > 0 ? diff / scale : diff;
}

const std::map<std::string, std::function<Tensor(const V&)>>& op_cases() {
  static const std::map<std::string, std::function<Tensor(const V&)>> cases = {
      {"conv2d_groups_dilation",
       [](const V& x) {
         return conv2d(x[0], x[1], x[2], {2, 2}, {2, 2}, {2, 2}, 2);
       }},
      {"conv2d_depthwise",
       [](const V& x) {
         return conv2d(x[0], x[1], {}, {1, 1}, {1, 1}, {1, 1}, 3);
       }},
      {"linear", [](const V& x) { return linear(x[0], x[1], x[2]); }},
      {"matmul_broadcast", [](const V& x) { return matmul(x[0], x[1]); }},
      {"bmm", [](const V& x) { return matmul(x[0], x[1]); }},
      {"batch_norm_train",
       [](const V& x) { return batch_norm(x[0], {}, {}, x[1], x[2], true, 0.1, 1e-5); }},
      {"batch_norm_eval",
       [](const V& x) {
         Tensor rm = from_vector<float>({-0.5f, 0.0f, 0.5f}, {3});
         Tensor rv = from_vector<float>({0.5f, 1.25f, 2.0f}, {3});
         return batch_norm(x[0], rm, rv, x[1], x[2], false, 0.1, 1e-5);
       }},
      {"layer_norm", [](const V& x) { return layer_norm(x[0], {8}, x[1], x[2], 1e-5); }},
      {"softmax", [](const V& x) { return softmax(x[0], -1); }},
      {"log_softmax", [](const V& x) { return log_softmax(x[0], 0); }},
      {"gelu", [](const V& x) { return gelu(x[0]); }},
      {"gelu_tanh", [](const V& x) { return gelu(x[0], "tanh"); }},
      {"relu6", [](const V& x) { return relu6(x[0]); }},
      {"hardtanh", [](const V& x) { return hardtanh(x[0], -1.5, 0.5); }},
      {"hardswish", [](const V& x) { return hardswish(x[0]); }},
      {"max_pool2d",
       [](const V& x) {
         return max_pool2d(x[0], {3, 3}, {2, 2}, {1, 1}, {1, 1}, true);
       }},
      {"avg_pool2d",
       [](const V& x) {
         return avg_pool2d(x[0], {3, 3}, {2, 2}, {1, 1}, true, false);
       }},
      {"adaptive_avg_pool2d",
       [](const V& x) {
         return adaptive_avg_pool2d(x[0], {3, 2});
       }},
      {"embedding", [](const V& x) { return embedding(x[0], x[1]); }},
      {"cross_entropy", [](const V& x) { return cross_entropy(x[0], x[1]); }},
      {"nll_loss_sum", [](const V& x) { return nll_loss(log_softmax(x[0], 1), x[1], "sum"); }},
      {"cat_permute_reshape",
       [](const V& x) {
         return cat({x[0], x[1]}, 1).permute({2, 0, 1}).reshape({4, -1});
       }},
      {"expand_mul_div",
       [](const V& x) {
         return div(mul(x[0].expand({3, 4}), x[1]), x[2]);
       }},
      {"reductions",
       [](const V& x) {
         const Tensor& t = x[0];
         return add(add(add(add(sum(t, {1}), mean(t, {1})), amax(t, {1})), var(t, {1})),
                    std_dev(t, {1}));
       }},
      {"sdpa", [](const V& x) { return scaled_dot_product_attention(x[0], x[1], x[2]); }},
      {"slice_select",
       [](const V& x) { return add(sum(x[0].slice(0, 1, 4, 2), {0}), x[0].select(0, -1)); }},
  };
  return cases;
}

}  // namespace

TEST(GradsOracle, OpsMatchPyTorch) {
  LATHE_REQUIRE_ORACLE_PYTHON();
  ASSERT_NO_FATAL_FAILURE(generate("op_grads.safetensors", "--ops"));
  io::SafetensorsFile f(dir() + "/op_grads.safetensors");
  int checked = 0;
  for (const auto& [name, fn] : op_cases()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(f.contains(name + ".v")) << "the generator has no case " << name;
    V inputs;
    for (int i = 0; f.contains(name + ".in." + std::to_string(i)); ++i) {
      Tensor t = f.get(name + ".in." + std::to_string(i)).clone();
      if (is_floating(t.dtype())) t.set_requires_grad(true);
      inputs.push_back(t);
    }
    Tensor y = fn(inputs);
    y.backward(f.get(name + ".v"));
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::string key = name + ".grad." + std::to_string(i);
      if (!f.contains(key)) continue;
      const double err = relative_error(inputs[i].grad(), f.get(key));
      EXPECT_LT(err, 1e-4) << key;
      ++checked;
    }
  }
  EXPECT_GE(checked, 40);
}

class ModelGradsOracle : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelGradsOracle, ParameterGradientsMatchPyTorch) {
  LATHE_REQUIRE_ORACLE_PYTHON();
  const std::string name = GetParam();
  ASSERT_NO_FATAL_FAILURE(generate(name + ".grads.safetensors", "--models " + name));
  io::SafetensorsFile f(dir() + "/" + name + ".grads.safetensors");
  auto cfg = nlohmann::json::parse(f.metadata().at("config"));
  models::ModelOptions o;
  if (name == "bert") {
    models::BertConfig c;
    c.vocab_size = cfg.value("vocab_size", c.vocab_size);
    c.hidden_size = cfg.value("hidden", c.hidden_size);
    c.num_hidden_layers = cfg.value("layers", c.num_hidden_layers);
    c.num_attention_heads = cfg.value("heads", c.num_attention_heads);
    c.intermediate_size = cfg.value("intermediate", c.intermediate_size);
    c.max_position_embeddings = cfg.value("max_position", c.max_position_embeddings);
    c.type_vocab_size = cfg.value("type_vocab", c.type_vocab_size);
    o.bert = c;
  } else if (name == "vit") {
    models::ViTConfig c;
    c.img_size = cfg.value("img_size", c.img_size);
    c.patch_size = cfg.value("patch", c.patch_size);
    c.depth = cfg.value("depth", c.depth);
    c.embed_dim = cfg.value("dim", c.embed_dim);
    c.num_heads = cfg.value("heads", c.num_heads);
    c.num_classes = cfg.value("classes", c.num_classes);
    o.vit = c;
  } else {
    o.num_classes = cfg.value("num_classes", int64_t{1000});
  }
  auto spec = models::create_model(name, o);
  spec->module->to(DType::f64);
  std::map<std::string, Tensor> weights;
  for (const std::string& key : f.keys())
    if (key.rfind("weight.", 0) == 0) weights[key.substr(7)] = f.get(key);
  spec->module->load_state_dict(weights);
  if (spec->is_cnn) {
    spec->module->train();
    for (auto& [path, m] : spec->module->named_modules())
      if (m->type_name() == "Dropout") m->eval();
  } else {
    spec->module->eval();
  }
  for (Tensor& p : spec->module->parameters()) p.set_requires_grad(true);
  V inputs;
  for (int i = 0; f.contains("input." + std::to_string(i)); ++i)
    inputs.push_back(f.get("input." + std::to_string(i)));
  const V outputs = spec->forward(inputs);
  Tensor loss;
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor term = sum(mul(outputs[i], f.get("v." + std::to_string(i))));
    loss = loss.defined() ? add(loss, term) : term;
  }
  loss.backward();
  // Some gradients are zero in exact arithmetic (a bias before a train-mode BatchNorm, bert's
  // key bias under softmax): they are rounding noise, judged against the largest gradient.
  double global = 0;
  for (const std::string& key : f.keys())
    if (key.rfind("grad.", 0) == 0)
      for (double v : f.get(key).to_vector<double>()) global = std::max(global, std::abs(v));
  int checked = 0;
  double worst = 0;
  for (const auto& [pname, p] : spec->module->named_parameters()) {
    const std::string key = "grad." + pname;
    ASSERT_TRUE(f.contains(key)) << key;
    ASSERT_TRUE(p.grad().defined()) << pname << " got no gradient";
    const Tensor want = f.get(key);
    auto a = p.grad().to_vector<double>(), b = want.to_vector<double>();
    ASSERT_EQ(p.grad().shape(), want.shape()) << pname;
    double diff = 0, scale = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      diff = std::max(diff, std::abs(a[i] - b[i]));
      scale = std::max(scale, std::abs(b[i]));
    }
    const double err = diff / std::max(scale, 1e-6 * global);
    worst = std::max(worst, err);
    EXPECT_LT(err, 1e-7) << pname << ": max |diff| " << diff << ", max |torch| " << scale;
    ++checked;
  }
  std::printf("[grads] %s: %d parameter gradients, worst relative error %.3g\n", name.c_str(),
              checked, worst);
  EXPECT_GT(checked, 5);
}

INSTANTIATE_TEST_SUITE_P(Zoo, ModelGradsOracle,
                         ::testing::Values("resnet18", "mobilenet_v2", "squeezenet1_1", "vit",
                                           "bert"));
