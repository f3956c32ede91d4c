// The model zoo's structure: parameter counts, state_dict keys / dtypes / shapes exactly as the
// reference models' (tests/models/reference_state_dicts.txt, dumped from
// tests/oracle/ref_models.py), and forward output shapes at small sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "lathe/core/random.h"
#include "lathe/models/registry.h"

using namespace lathe;
using namespace lathe::models;

namespace {

int64_t count_parameters(const nn::Module& m) {
  int64_t n = 0;
  for (const Tensor& p : m.parameters()) n += p.numel();
  return n;
}

// model -> key -> "dtype shape" from the reference dump.
const std::map<std::string, std::map<std::string, std::string>>& reference_state_dicts() {
  static const auto refs = [] {
    std::map<std::string, std::map<std::string, std::string>> r;
    std::ifstream in(LATHE_SOURCE_DIR "/tests/models/reference_state_dicts.txt");
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream ls(line);
      std::string model, key, dtype, shape;
      ls >> model >> key >> dtype >> shape;
      r[model][key] = dtype + " " + shape;
    }
    return r;
  }();
  return refs;
}

std::string describe(const Tensor& t) {
  std::ostringstream os;
  os << dtype_name(t.dtype()) << ' ';
  if (t.dim() == 0) os << '-';
  for (int64_t i = 0; i < t.dim(); ++i) os << (i ? "," : "") << t.shape()[i];
  return os.str();
}

ModelOptions model_options(uint64_t seed, int64_t num_classes = 1000) {
  ModelOptions o;
  o.seed = seed;
  o.num_classes = num_classes;
  return o;
}

InputOptions image_options(int64_t size) {
  InputOptions o;
  o.image_size = size;
  return o;
}

struct CountCase {
  const char* name;
  int64_t params;
};

class ModelStructure : public ::testing::TestWithParam<CountCase> {};

}  // namespace

TEST_P(ModelStructure, ParameterCountAndStateDictMatchTheReference) {
  const CountCase c = GetParam();
  auto spec = create_model(c.name, model_options(0));
  EXPECT_EQ(count_parameters(*spec->module), c.params);
  const auto& refs = reference_state_dicts();
  ASSERT_TRUE(refs.count(c.name)) << "reference dump lacks " << c.name;
  const auto& ref = refs.at(c.name);
  auto sd = spec->module->state_dict();
  EXPECT_EQ(sd.size(), ref.size());
  for (const auto& [key, want] : ref) {
    auto it = sd.find(key);
    if (it == sd.end()) {
      ADD_FAILURE() << c.name << ": missing " << key;
      continue;
    }
    EXPECT_EQ(describe(it->second), want) << c.name << ": " << key;
  }
  for (const auto& [key, t] : sd) EXPECT_TRUE(ref.count(key)) << c.name << ": unexpected " << key;
  // Models come back in eval mode.
  EXPECT_FALSE(spec->module->is_training());
}

INSTANTIATE_TEST_SUITE_P(
    Zoo, ModelStructure,
    ::testing::Values(CountCase{"resnet18", 11689512}, CountCase{"resnet50", 25557032},
                      CountCase{"resnext50_32x4d", 25028904}, CountCase{"alexnet", 61100840},
                      CountCase{"vgg16", 138357544}, CountCase{"mobilenet_v2", 3504872},
                      CountCase{"mnasnet1_0", 4383312}, CountCase{"squeezenet1_1", 1235496},
                      CountCase{"bert", 109482240}, CountCase{"vit", 86567656},
                      CountCase{"vit_small_patch16_224", 22050664}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ModelZoo, NamesAndErrors) {
  const auto& names = model_names();
  ASSERT_EQ(names.size(), 10u);
  EXPECT_EQ(names.front(), "resnet18");
  EXPECT_EQ(names.back(), "vit");
  EXPECT_TRUE(is_cnn("squeezenet1_1"));
  EXPECT_FALSE(is_cnn("bert"));
  EXPECT_FALSE(is_cnn("vit"));
  try {
    create_model("resnet19");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[models] unknown model 'resnet19'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("resnext50_32x4d"), std::string::npos);
  }
  EXPECT_THROW(default_inputs("nope", 1, 0), Error);
}

TEST(ModelZoo, BertKeepsPositionBuffersOutOfTheStateDict) {
  BertConfig c;
  c.vocab_size = 50;
  c.hidden_size = 16;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 2;
  c.intermediate_size = 32;
  c.max_position_embeddings = 20;
  auto m = bert(c);
  std::vector<std::string> buffers;
  for (auto& [n, t] : m->named_buffers()) buffers.push_back(n);
  EXPECT_EQ(buffers,
            (std::vector<std::string>{"embeddings.position_ids", "embeddings.token_type_ids"}));
  EXPECT_FALSE(m->state_dict().count("embeddings.position_ids"));
  // Padding row of the word embeddings starts at zero, as transformers initializes it.
  auto pad =
      m->state_dict().at("embeddings.word_embeddings.weight").select(0, 0).to_vector<float>();
  EXPECT_EQ(pad, std::vector<float>(16, 0.f));
}

TEST(ModelZoo, DefaultInputs) {
  auto img = default_inputs("resnet18", 2, 7);
  ASSERT_EQ(img.size(), 1u);
  EXPECT_EQ(img[0].shape(), (std::vector<int64_t>{2, 3, 224, 224}));
  EXPECT_EQ(img[0].dtype(), DType::f32);
  EXPECT_EQ(default_inputs("resnet18", 2, 7)[0].to_vector<float>(), img[0].to_vector<float>());
  EXPECT_NE(default_inputs("resnet18", 2, 8)[0].to_vector<float>(), img[0].to_vector<float>());
  auto b = default_inputs("bert", 3, 1);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].shape(), (std::vector<int64_t>{3, 128}));
  EXPECT_EQ(b[0].dtype(), DType::i64);
  for (int64_t id : b[0].to_vector<int64_t>()) {
    ASSERT_GE(id, 0);
    ASSERT_LT(id, 30522);
  }
  EXPECT_EQ(b[1].to_vector<int64_t>(), std::vector<int64_t>(3 * 128, 1));
  EXPECT_EQ(default_inputs("vit", 1, 0)[0].shape(), (std::vector<int64_t>{1, 3, 224, 224}));
  ViTConfig small;
  small.img_size = 32;
  InputOptions small_in;
  small_in.vit = small;
  EXPECT_EQ(default_inputs("vit", 1, 0, small_in)[0].shape(), (std::vector<int64_t>{1, 3, 32, 32}));
  EXPECT_EQ(default_inputs("alexnet", 1, 0, image_options(64))[0].shape(),
            (std::vector<int64_t>{1, 3, 64, 64}));
}

// ---------------------------------------------------------------- forward shapes (needs ops)

class CnnForward : public ::testing::TestWithParam<std::string> {};

TEST_P(CnnForward, SmallImagesGiveLogits) {
  auto spec = create_model(GetParam(), model_options(1, 10));
  auto out = spec->forward(default_inputs(GetParam(), 2, 3, image_options(64)));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 10}));
  for (float v : out[0].to_vector<float>()) ASSERT_TRUE(std::isfinite(v));
}

INSTANTIATE_TEST_SUITE_P(Zoo, CnnForward,
                         ::testing::Values("resnet18", "resnet50", "resnext50_32x4d", "alexnet",
                                           "vgg16", "mobilenet_v2", "mnasnet1_0", "squeezenet1_1"));

TEST(ModelZoo, SmallBertForward) {
  BertConfig c;
  c.vocab_size = 100;
  c.hidden_size = 32;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.intermediate_size = 64;
  c.max_position_embeddings = 64;
  ModelOptions mo = model_options(2);
  mo.bert = c;
  auto spec = create_model("bert", mo);
  InputOptions io;
  io.seq_len = 12;
  io.bert = c;
  auto in = default_inputs("bert", 2, 4, io);
  auto out = spec->forward(in);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 12, 32}));
  EXPECT_EQ(out[1].shape(), (std::vector<int64_t>{2, 32}));
  // Without a mask the result equals the all-ones mask.
  auto no_mask = spec->forward({in[0]});
  EXPECT_EQ(no_mask[0].to_vector<float>(), out[0].to_vector<float>());
  // Masking the tail changes the unmasked tokens' outputs.
  Tensor mask = in[1].clone();
  mask.data<int64_t>()[12 + 11] = 0;
  auto masked = spec->forward({in[0], mask});
  EXPECT_EQ(masked[0].select(0, 0).to_vector<float>(), out[0].select(0, 0).to_vector<float>());
  EXPECT_NE(masked[0].select(0, 1).to_vector<float>(), out[0].select(0, 1).to_vector<float>());
  EXPECT_THROW(spec->forward({in[0].slice(1, 0, 5), in[1]}), Error);
}

TEST(ModelZoo, SmallVitForward) {
  ViTConfig c;
  c.img_size = 32;
  c.patch_size = 8;
  c.depth = 2;
  c.embed_dim = 64;
  c.num_heads = 4;
  c.num_classes = 10;
  ModelOptions mo = model_options(3);
  mo.vit = c;
  auto spec = create_model("vit", mo);
  InputOptions io;
  io.vit = c;
  EXPECT_EQ(spec->module->state_dict().at("pos_embed").shape(), (std::vector<int64_t>{1, 17, 64}));
  auto out = spec->forward(default_inputs("vit", 2, 5, io));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 10}));
  EXPECT_THROW(spec->forward(default_inputs("vit", 1, 5, image_options(40))), Error);
}
