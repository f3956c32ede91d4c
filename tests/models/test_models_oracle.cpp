// The model zoo against PyTorch: tests/oracle/gen_models.py --small writes each reference
// model's weights and its eval (and, for the CNNs, train-mode) outputs; the Lathe model loads the
// same weights and must reproduce them. Relative error = max|lathe - torch| / max|torch|.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "lathe/io/safetensors.h"
#include "lathe/models/registry.h"
#include "tests/oracle/oracle_python.h"

using namespace lathe;
using namespace lathe::models;

namespace {

double relative_error(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.shape(), want.shape());
  if (got.shape() != want.shape()) return INFINITY;
  std::vector<double> a = got.to_vector<double>(), b = want.to_vector<double>();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  if (std::isnan(diff)) return INFINITY;
  return scale > 0 ? diff / scale : diff;
}

std::string data_dir() { return std::string(LATHE_BINARY_DIR) + "/oracle_models"; }

// Runs the generator for one model unless its files exist and are newer than the scripts.
void generate(const std::string& name) {
  namespace fs = std::filesystem;
  const std::string script = std::string(LATHE_SOURCE_DIR) + "/tests/oracle/gen_models.py";
  const std::string refs = std::string(LATHE_SOURCE_DIR) + "/tests/oracle/ref_models.py";
  const fs::path io = data_dir() + "/" + name + ".io.safetensors";
  const fs::path weights = data_dir() + "/" + name + ".weights.safetensors";
  if (fs::exists(io) && fs::exists(weights)) {
    auto t = std::min(fs::last_write_time(io), fs::last_write_time(weights));
    if (t > fs::last_write_time(script) && t > fs::last_write_time(refs)) return;
  }
  // Built by appending: GCC 12 warns falsely on "literal" + std::string chains under -O3.
  std::string cmd = "\"";
  cmd.append(oracle::python_path()).append("\" \"").append(script).append("\" --small --out \"");
  cmd.append(data_dir()).append("\" --only ").append(name).append(" 2>&1");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// The model built with the config the generator recorded in the io file's metadata.
std::shared_ptr<ModelSpec> build_like_oracle(const std::string& name,
                                             const io::SafetensorsFile& io_file) {
  ModelOptions o;
  o.seed = 0;
  auto cfg = nlohmann::json::parse(io_file.metadata().at("config"));
  if (name == "bert") {
    BertConfig c;
    c.vocab_size = cfg.value("vocab_size", c.vocab_size);
    c.hidden_size = cfg.value("hidden", c.hidden_size);
    c.num_hidden_layers = cfg.value("layers", c.num_hidden_layers);
    c.num_attention_heads = cfg.value("heads", c.num_attention_heads);
    c.intermediate_size = cfg.value("intermediate", c.intermediate_size);
    c.max_position_embeddings = cfg.value("max_position", c.max_position_embeddings);
    c.type_vocab_size = cfg.value("type_vocab", c.type_vocab_size);
    o.bert = c;
  } else if (name == "vit") {
    ViTConfig c;
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
  return create_model(name, o);
}

std::vector<Tensor> tensors_with_prefix(const io::SafetensorsFile& f, const std::string& prefix) {
  std::vector<Tensor> r;
  for (int i = 0; f.contains(prefix + std::to_string(i)); ++i)
    r.push_back(f.get(prefix + std::to_string(i)));
  return r;
}

class ModelOracle : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(ModelOracle, MatchesPyTorch) {
  LATHE_REQUIRE_ORACLE_PYTHON();
  const std::string name = GetParam();
  ASSERT_NO_FATAL_FAILURE(generate(name));
  io::SafetensorsFile io_file(data_dir() + "/" + name + ".io.safetensors");
  const auto weights = io::load_safetensors(data_dir() + "/" + name + ".weights.safetensors");
  const std::vector<Tensor> inputs = tensors_with_prefix(io_file, "input.");
  ASSERT_FALSE(inputs.empty());
  const double tol = is_cnn(name) ? 1e-4 : 1e-3;

  auto spec = build_like_oracle(name, io_file);
  spec->module->load_state_dict(weights);
  spec->module->eval();
  const std::vector<Tensor> want = tensors_with_prefix(io_file, "output.");
  const std::vector<Tensor> got = spec->forward(inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = relative_error(got[i], want[i]);
    std::printf("[oracle] %s eval output %zu: relative error %.3g\n", name.c_str(), i, err);
    EXPECT_LT(err, tol) << name << " eval output " << i;
  }

  if (!is_cnn(name)) return;
  // Train mode from the same weights, Dropout kept inactive as the generator did.
  auto train = build_like_oracle(name, io_file);
  train->module->load_state_dict(weights);
  train->module->train();
  for (auto& [path, m] : train->module->named_modules())
    if (m->type_name() == "Dropout") m->eval();
  const std::vector<Tensor> want_train = tensors_with_prefix(io_file, "train_output.");
  const std::vector<Tensor> got_train = train->forward(inputs);
  ASSERT_EQ(got_train.size(), want_train.size());
  for (size_t i = 0; i < got_train.size(); ++i) {
    const double err = relative_error(got_train[i], want_train[i]);
    std::printf("[oracle] %s train output %zu: relative error %.3g\n", name.c_str(), i, err);
    EXPECT_LT(err, tol) << name << " train output " << i;
  }
  const auto state = train->module->state_dict();
  int checked = 0;
  double worst_state = 0;
  for (const std::string& key : io_file.keys()) {
    if (key.rfind("train_state.", 0) != 0) continue;
    const std::string buffer = key.substr(std::string("train_state.").size());
    ASSERT_TRUE(state.count(buffer)) << name << ": no buffer " << buffer;
    const Tensor want_state = io_file.get(key);
    EXPECT_EQ(state.at(buffer).dtype(), want_state.dtype()) << buffer;
    const double err = relative_error(state.at(buffer), want_state);
    worst_state = std::max(worst_state, err);
    EXPECT_LT(err, tol) << name << " " << buffer;
    ++checked;
  }
  const int buffers = static_cast<int>(train->module->named_buffers().size());
  EXPECT_EQ(checked, buffers) << name << ": every running stat is compared";
  std::printf("[oracle] %s train state (%d buffers): worst relative error %.3g\n", name.c_str(),
              checked, worst_state);
}

INSTANTIATE_TEST_SUITE_P(Zoo, ModelOracle,
                         ::testing::Values("resnet18", "resnet50", "resnext50_32x4d", "alexnet",
                                           "vgg16", "mobilenet_v2", "mnasnet1_0", "squeezenet1_1",
                                           "bert", "vit"),
                         [](const auto& info) { return info.param; });
