#include "lathe/models/bert.h"

#include <cmath>
#include <limits>

#include "lathe/nn/init.h"
#include "lathe/ops/ops.h"

namespace lathe::models {

using namespace lathe::nn;

BertEmbeddings::BertEmbeddings(const BertConfig& c) {
  register_module("word_embeddings", make<Embedding>(c.vocab_size, c.hidden_size));
  register_module("position_embeddings", make<Embedding>(c.max_position_embeddings, c.hidden_size));
  register_module("token_type_embeddings", make<Embedding>(c.type_vocab_size, c.hidden_size));
  register_module("LayerNorm",
                  make<LayerNorm>(std::vector<int64_t>{c.hidden_size}, c.layer_norm_eps));
  register_module("dropout", make<Dropout>(0.1));
  register_buffer("position_ids",
                  arange(c.max_position_embeddings).view({1, c.max_position_embeddings}), false);
  register_buffer("token_type_ids", zeros({1, c.max_position_embeddings}, DType::i64), false);
}

Tensor BertEmbeddings::forward(const Tensor& input_ids) {
  LATHE_CHECK(input_ids.defined() && input_ids.dim() == 2, "[bert] input_ids must be [B, S], got ",
              input_ids.defined() ? input_ids.shape_string() : "undefined");
  const int64_t seq = input_ids.shape()[1];
  const int64_t max_pos = buffer("position_ids").shape()[1];
  LATHE_CHECK(seq <= max_pos, "[bert] sequence length ", seq, " exceeds max_position_embeddings ",
              max_pos);
  // Position and token-type embeddings are [1, S, hidden] and broadcast over the batch.
  Tensor x =
      add(child("word_embeddings")->forward(input_ids),
          child("token_type_embeddings")->forward(buffer("token_type_ids").slice(1, 0, seq)));
  x = add(x, child("position_embeddings")->forward(buffer("position_ids").slice(1, 0, seq)));
  return child("dropout")->forward(child("LayerNorm")->forward(x));
}

BertSelfAttention::BertSelfAttention(const BertConfig& c)
    : heads_(c.num_attention_heads), head_size_(c.hidden_size / c.num_attention_heads) {
  LATHE_CHECK(c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads == 0,
              "[bert] hidden_size ", c.hidden_size, " is not a multiple of num_attention_heads ",
              c.num_attention_heads);
  register_module("query", make<Linear>(c.hidden_size, c.hidden_size));
  register_module("key", make<Linear>(c.hidden_size, c.hidden_size));
  register_module("value", make<Linear>(c.hidden_size, c.hidden_size));
  register_module("dropout", make<Dropout>(0.1));
}

Tensor BertSelfAttention::forward(const Tensor& x, const Tensor& additive_mask) {
  const int64_t b = x.shape()[0], s = x.shape()[1];
  auto split = [&](const char* name) {
    return child(name)->forward(x).view({b, s, heads_, head_size_}).transpose(1, 2);
  };
  Tensor q = split("query"), k = split("key"), v = split("value");
  Tensor ctx;
  if (is_training()) {  // attention-probability dropout needs the probabilities
    Tensor scores =
        add(div(matmul(q, k.transpose(-1, -2)), std::sqrt(double(head_size_))), additive_mask);
    ctx = matmul(child("dropout")->forward(softmax(scores, -1)), v);
  } else {
    ctx = scaled_dot_product_attention(q, k, v, additive_mask);
  }
  return ctx.transpose(1, 2).reshape({b, s, heads_ * head_size_});
}

BertResidualOutput::BertResidualOutput(int64_t in, const BertConfig& c, std::string type)
    : type_(std::move(type)) {
  register_module("dense", make<Linear>(in, c.hidden_size));
  register_module("LayerNorm",
                  make<LayerNorm>(std::vector<int64_t>{c.hidden_size}, c.layer_norm_eps));
  register_module("dropout", make<Dropout>(0.1));
}

Tensor BertResidualOutput::forward(const Tensor& h, const Tensor& residual) {
  Tensor y = child("dropout")->forward(child("dense")->forward(h));
  return child("LayerNorm")->forward(add(y, residual));
}

namespace {

class BertAttention : public Module {
 public:
  explicit BertAttention(const BertConfig& c) {
    self_ = register_module("self", make<BertSelfAttention>(c));
    output_ =
        register_module("output", make<BertResidualOutput>(c.hidden_size, c, "BertSelfOutput"));
  }
  Tensor forward(const Tensor& x, const Tensor& mask) {
    return output_->forward(self_->forward(x, mask), x);
  }
  std::string type_name() const override { return "BertAttention"; }

 private:
  std::shared_ptr<BertSelfAttention> self_;
  std::shared_ptr<BertResidualOutput> output_;
};

class BertIntermediate : public Module {
 public:
  explicit BertIntermediate(const BertConfig& c) {
    register_module("dense", make<Linear>(c.hidden_size, c.intermediate_size));
    register_module("intermediate_act_fn", make<GELU>());  // HF "gelu": the erf form
  }
  Tensor forward(const Tensor& x) override {
    return child("intermediate_act_fn")->forward(child("dense")->forward(x));
  }
  std::string type_name() const override { return "BertIntermediate"; }
};

class BertPooler : public Module {
 public:
  explicit BertPooler(const BertConfig& c) {
    register_module("dense", make<Linear>(c.hidden_size, c.hidden_size));
    register_module("activation", make<Tanh>());
  }
  Tensor forward(const Tensor& h) override {  // first token's hidden state
    return child("activation")->forward(child("dense")->forward(h.select(1, 0)));
  }
  std::string type_name() const override { return "BertPooler"; }
};

// Holds the layers as "layer" (a ModuleList in transformers); BertModel runs them.
class BertEncoder : public Module {
 public:
  explicit BertEncoder(std::shared_ptr<Sequential> layers) { register_module("layer", layers); }
  std::string type_name() const override { return "BertEncoder"; }
};

}  // namespace

BertLayer::BertLayer(const BertConfig& c) {
  register_module("attention", make<BertAttention>(c));
  register_module("intermediate", make<BertIntermediate>(c));
  register_module("output", make<BertResidualOutput>(c.intermediate_size, c, "BertOutput"));
}

Tensor BertLayer::forward(const Tensor& x, const Tensor& additive_mask) {
  Tensor a = std::static_pointer_cast<BertAttention>(child("attention"))->forward(x, additive_mask);
  Tensor i = child("intermediate")->forward(a);
  return std::static_pointer_cast<BertResidualOutput>(child("output"))->forward(i, a);
}

BertModel::BertModel(BertConfig c) : c_(c) {
  register_module("embeddings", make<BertEmbeddings>(c));
  auto layer_list = make<Sequential>();  // a ModuleList: "encoder.layer.N"
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    layers_.push_back(make<BertLayer>(c));
    layer_list->push_back(layers_.back());
  }
  register_module("encoder", make<BertEncoder>(layer_list));
  register_module("pooler", make<BertPooler>(c));
  // transformers' _init_weights with initializer_range 0.02.
  apply([](const std::string&, Module& m) {
    const std::string t = m.type_name();
    if (t == "Linear" || t == "Embedding") {
      init::normal_(m.param("weight"), 0.0, 0.02);
      if (t == "Linear") init::constant_(m.param("bias"), 0.0);
    }
  });
  auto word = child("embeddings")->child("word_embeddings");
  if (c.pad_token_id >= 0 && c.pad_token_id < c.vocab_size)
    init::constant_(word->param("weight").select(0, c.pad_token_id), 0.0);
}

std::vector<Tensor> BertModel::forward_all(const std::vector<Tensor>& inputs) {
  LATHE_CHECK(inputs.size() == 1 || inputs.size() == 2,
              "[bert] takes input_ids and optionally attention_mask, got ", inputs.size(),
              " inputs");
  const Tensor& ids = inputs[0];
  LATHE_CHECK(ids.defined() && ids.dim() == 2 && !is_floating(ids.dtype()),
              "[bert] input_ids must be integer [B, S], got ",
              ids.defined() ? ids.shape_string() : "undefined");
  const int64_t b = ids.shape()[0], s = ids.shape()[1];
  Tensor mask;
  if (inputs.size() == 2 && inputs[1].defined()) {
    LATHE_CHECK(inputs[1].shape() == ids.shape(), "[bert] attention_mask ",
                inputs[1].shape_string(), " does not match input_ids ", ids.shape_string());
    mask = inputs[1];
  } else {
    mask = ones({b, s}, DType::i64);
  }
  // (1 - mask) * finfo(f32).min, as [B, 1, 1, S].
  const double min_f32 = std::numeric_limits<float>::lowest();
  Tensor additive = mul(rsub(mask.to(DType::f32), 1.0), min_f32).view({b, 1, 1, s});
  Tensor h = child("embeddings")->forward(ids);
  for (auto& layer : layers_) h = layer->forward(h, additive);
  return {h, child("pooler")->forward(h)};
}

std::shared_ptr<BertModel> bert(BertConfig c) { return make<BertModel>(c); }

}  // namespace lathe::models
