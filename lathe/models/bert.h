// Hugging Face BertModel (encoder + pooler), with transformers' state_dict names
// (embeddings.word_embeddings.weight, encoder.layer.0.attention.self.query.weight, ...).
// position_ids / token_type_ids are non-persistent buffers, as in recent transformers.
#pragma once

#include <memory>

#include "lathe/nn/layers.h"

namespace lathe::models {

struct BertConfig {  // bert-base-uncased defaults
  int64_t vocab_size = 30522;
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 2;
  double layer_norm_eps = 1e-12;
  int64_t pad_token_id = 0;
};

class BertEmbeddings : public nn::Module {
 public:
  explicit BertEmbeddings(const BertConfig& c);
  Tensor forward(const Tensor& input_ids) override;  // i64 [B, S] -> [B, S, hidden]
  std::string type_name() const override { return "BertEmbeddings"; }
};

class BertSelfAttention : public nn::Module {
 public:
  explicit BertSelfAttention(const BertConfig& c);
  // x [B, S, hidden], additive_mask f32 broadcastable to [B, heads, S, S].
  Tensor forward(const Tensor& x, const Tensor& additive_mask);
  std::string type_name() const override { return "BertSelfAttention"; }

 private:
  int64_t heads_, head_size_;
};

// dense -> dropout -> LayerNorm(x + residual); BertSelfOutput and BertOutput.
class BertResidualOutput : public nn::Module {
 public:
  BertResidualOutput(int64_t in, const BertConfig& c, std::string type);
  Tensor forward(const Tensor& h, const Tensor& residual);
  std::string type_name() const override { return type_; }

 private:
  std::string type_;
};

class BertLayer : public nn::Module {
 public:
  explicit BertLayer(const BertConfig& c);
  Tensor forward(const Tensor& x, const Tensor& additive_mask);
  std::string type_name() const override { return "BertLayer"; }
};

class BertModel : public nn::Module {
 public:
  explicit BertModel(BertConfig c = {});
  // {input_ids i64 [B,S], attention_mask i64 [B,S] (optional)} ->
  // {last_hidden_state [B,S,hidden], pooled_output [B,hidden]}.
  std::vector<Tensor> forward_all(const std::vector<Tensor>& inputs) override;
  std::string type_name() const override { return "BertModel"; }
  const BertConfig& config() const { return c_; }

 private:
  BertConfig c_;
  std::vector<std::shared_ptr<BertLayer>> layers_;
};

std::shared_ptr<BertModel> bert(BertConfig c = {});

}  // namespace lathe::models
