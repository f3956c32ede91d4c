// Small-but-valid configurations of the zoo models, shared by the tests that run every model
// (lazy device, trace once): bert and vit shrunk, CNNs with 10 classes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lathe/models/registry.h"

namespace lathe::test_models {

inline models::BertConfig small_bert(int64_t max_positions = 64) {
  models::BertConfig c;
  c.vocab_size = 100;
  c.hidden_size = 32;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.intermediate_size = 64;
  c.max_position_embeddings = max_positions;
  return c;
}

inline models::ViTConfig small_vit() {
  models::ViTConfig c;
  c.img_size = 32;
  c.patch_size = 8;
  c.depth = 2;
  c.embed_dim = 64;
  c.num_heads = 4;
  c.num_classes = 10;
  return c;
}

inline std::shared_ptr<models::ModelSpec> small_model(const std::string& name, uint64_t seed,
                                                      int64_t bert_max_positions = 64) {
  models::ModelOptions o;
  o.seed = seed;
  o.num_classes = 10;
  if (name == "bert") o.bert = small_bert(bert_max_positions);
  if (name == "vit") o.vit = small_vit();
  return models::create_model(name, o);
}

}  // namespace lathe::test_models
