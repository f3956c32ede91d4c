#include "lathe/models/registry.h"

#include <algorithm>

#include "lathe/core/random.h"
#include "lathe/models/mobilenet_mnasnet.h"
#include "lathe/models/resnet.h"
#include "lathe/models/squeezenet.h"
#include "lathe/models/vgg_alexnet.h"

namespace lathe::models {

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = {
      "resnet18",     "resnet50",   "resnext50_32x4d", "alexnet", "vgg16",
      "mobilenet_v2", "mnasnet1_0", "squeezenet1_1",   "bert",    "vit"};
  return names;
}

bool is_cnn(const std::string& name) {
  const auto& n = model_names();
  auto it = std::find(n.begin(), n.end(), name);
  return it != n.end() && it - n.begin() < 8;
}

namespace {

std::string known_names() {
  std::string r;
  for (const auto& n : model_names()) r += n + ", ";
  return r + "vit_base_patch16_224, vit_small_patch16_224";
}

ViTConfig vit_config_for(const std::string& name, const std::optional<ViTConfig>& given,
                         int64_t num_classes) {
  if (given) return *given;
  ViTConfig c = name == "vit_small_patch16_224" ? vit_small_patch16_224_config()
                                                : vit_base_patch16_224_config();
  c.num_classes = num_classes;
  return c;
}

bool is_vit(const std::string& name) {
  return name == "vit" || name == "vit_base_patch16_224" || name == "vit_small_patch16_224";
}

}  // namespace

std::shared_ptr<ModelSpec> create_model(const std::string& name, const ModelOptions& o) {
  if (o.seed) manual_seed(*o.seed);
  auto spec = std::make_shared<ModelSpec>();
  spec->name = name;
  spec->is_cnn = is_cnn(name);
  const int64_t k = o.num_classes;
  if (name == "resnet18")
    spec->module = resnet18(k);
  else if (name == "resnet50")
    spec->module = resnet50(k);
  else if (name == "resnext50_32x4d")
    spec->module = resnext50_32x4d(k);
  else if (name == "alexnet")
    spec->module = alexnet(k);
  else if (name == "vgg16")
    spec->module = vgg16(k);
  else if (name == "mobilenet_v2")
    spec->module = mobilenet_v2(k);
  else if (name == "mnasnet1_0")
    spec->module = mnasnet1_0(k);
  else if (name == "squeezenet1_1")
    spec->module = squeezenet1_1(k);
  else if (name == "bert")
    spec->module = bert(o.bert.value_or(BertConfig{}));
  else if (is_vit(name))
    spec->module = vit(vit_config_for(name, o.vit, k));
  else
    throw Error(detail::str("[models] unknown model '", name, "'; known: ", known_names()));
  spec->module->eval();
  return spec;
}

std::vector<Tensor> default_inputs(const std::string& name, int64_t batch, uint64_t seed,
                                   const InputOptions& o) {
  LATHE_CHECK(batch >= 1, "[models] batch must be at least 1, got ", batch);
  Generator gen(seed);
  if (name == "bert") {
    const BertConfig c = o.bert.value_or(BertConfig{});
    LATHE_CHECK(o.seq_len >= 1 && o.seq_len <= c.max_position_embeddings, "[models] bert seq_len ",
                o.seq_len, " must be in [1, ", c.max_position_embeddings, "]");
    return {randint(0, c.vocab_size, {batch, o.seq_len}, DType::i64, &gen),
            ones({batch, o.seq_len}, DType::i64)};
  }
  int64_t size = o.image_size;
  if (is_vit(name)) {
    if (size == 0) size = vit_config_for(name, o.vit, 1000).img_size;
  } else {
    LATHE_CHECK(is_cnn(name), "[models] unknown model '", name, "'; known: ", known_names());
    if (size == 0) size = 224;
  }
  return {randn({batch, 3, size, size}, DType::f32, &gen)};
}

}  // namespace lathe::models
