// timm VisionTransformer (class token, learned position embedding, pre-norm blocks), with timm's
// state_dict names: cls_token, pos_embed, patch_embed.proj, blocks.N.{norm1, attn.qkv, attn.proj,
// norm2, mlp.fc1, mlp.fc2}, norm, head.
#pragma once

#include <memory>

#include "lathe/nn/layers.h"

namespace lathe::models {

struct ViTConfig {  // vit_base_patch16_224 defaults
  int64_t img_size = 224;
  int64_t patch_size = 16;
  int64_t in_chans = 3;
  int64_t num_classes = 1000;  // 0: no head (Identity)
  int64_t embed_dim = 768;
  int64_t depth = 12;
  int64_t num_heads = 12;
  double mlp_ratio = 4.0;
  bool qkv_bias = true;
  double eps = 1e-6;
};

ViTConfig vit_base_patch16_224_config();
ViTConfig vit_small_patch16_224_config();

class ViTAttention : public nn::Module {  // timm Attention: qkv, proj
 public:
  explicit ViTAttention(const ViTConfig& c);
  Tensor forward(const Tensor& x) override;  // [B, N, D]
  std::string type_name() const override { return "Attention"; }

 private:
  int64_t heads_, head_dim_;
  std::shared_ptr<nn::Linear> qkv_, proj_;
};

class ViTBlock : public nn::Module {  // pre-norm: x + attn(norm1(x)); x + mlp(norm2(x))
 public:
  explicit ViTBlock(const ViTConfig& c);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Block"; }

 private:
  nn::ModulePtr norm1_, attn_, norm2_, mlp_;
};

class VisionTransformer : public nn::Module {
 public:
  explicit VisionTransformer(ViTConfig c = {});
  Tensor forward(const Tensor& x) override;  // images [B, C, H, W] -> logits [B, classes]
  std::string type_name() const override { return "VisionTransformer"; }
  const ViTConfig& config() const { return c_; }

 private:
  ViTConfig c_;
  nn::ModulePtr proj_, blocks_, norm_, head_;
};

std::shared_ptr<VisionTransformer> vit(ViTConfig c = {});
std::shared_ptr<VisionTransformer> vit_base_patch16_224(int64_t num_classes = 1000);
std::shared_ptr<VisionTransformer> vit_small_patch16_224(int64_t num_classes = 1000);

}  // namespace lathe::models
