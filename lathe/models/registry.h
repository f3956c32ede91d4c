// The model zoo by name: the ten benchmark models, built with lathe::nn, plus their default
// inputs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lathe/models/bert.h"
#include "lathe/models/vit.h"
#include "lathe/nn/module.h"

namespace lathe::models {

struct ModelOptions {
  int64_t num_classes = 1000;      // CNNs and vit (unless `vit` is given)
  std::optional<BertConfig> bert;  // "bert": bert-base when unset
  std::optional<ViTConfig> vit;    // "vit": the variant named (vit = vit_base_patch16_224)
  std::optional<uint64_t> seed;    // seeds the default generator before building
};

// A built model: its module and a uniform call taking and returning tensor lists.
struct ModelSpec {
  std::string name;
  nn::ModulePtr module;
  bool is_cnn = false;  // image classifier with BatchNorm-style layers (no token inputs)
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) const {
    return module->forward_all(inputs);
  }
};

// The ten benchmark model names, in the benchmark's order ("vit" is vit_base_patch16_224).
const std::vector<std::string>& model_names();
// True for the eight torchvision CNNs.
bool is_cnn(const std::string& name);

// Builds `name` (a model_names() entry, or vit_base_patch16_224 / vit_small_patch16_224).
// Throws lathe::Error naming the known models for an unknown name.
std::shared_ptr<ModelSpec> create_model(const std::string& name, const ModelOptions& options = {});

struct InputOptions {
  int64_t image_size = 0;          // 0: 224 for CNNs, the config's img_size for vit
  int64_t seq_len = 128;           // bert
  std::optional<BertConfig> bert;  // vocabulary size for the ids
  std::optional<ViTConfig> vit;
};

// Random inputs for `name` at `batch`, from a generator seeded by `seed`: images f32
// [B,3,S,S] (contiguous NCHW); bert: input_ids i64 [B,seq_len] in [0, vocab) and an
// attention_mask of ones (i64).
std::vector<Tensor> default_inputs(const std::string& name, int64_t batch, uint64_t seed,
                                   const InputOptions& options = {});

}  // namespace lathe::models
