#include "lathe/models/vit.h"

#include <cmath>

#include "lathe/nn/init.h"
#include "lathe/ops/ops.h"

namespace lathe::models {

using namespace lathe::nn;

ViTConfig vit_base_patch16_224_config() { return ViTConfig{}; }

ViTConfig vit_small_patch16_224_config() {
  ViTConfig c;
  c.embed_dim = 384;
  c.num_heads = 6;
  return c;
}

namespace {

class PatchEmbed : public Module {  // proj (conv k=s=patch), norm (Identity)
 public:
  explicit PatchEmbed(const ViTConfig& c) {
    register_module("proj", make<Conv2d>(c.in_chans, c.embed_dim, c.patch_size, c.patch_size));
    register_module("norm", make<Identity>());
  }
  std::string type_name() const override { return "PatchEmbed"; }
};

class Mlp : public Module {  // fc1, act (GELU), drop1, norm, fc2, drop2
 public:
  Mlp(int64_t dim, int64_t hidden) {
    fc1_ = register_module("fc1", make<Linear>(dim, hidden));
    register_module("act", make<GELU>());
    register_module("drop1", make<Dropout>(0.0));
    register_module("norm", make<Identity>());
    fc2_ = register_module("fc2", make<Linear>(hidden, dim));
    register_module("drop2", make<Dropout>(0.0));
  }
  Tensor forward(const Tensor& x) override { return fc2_->forward(gelu(fc1_->forward(x))); }
  std::string type_name() const override { return "Mlp"; }

 private:
  std::shared_ptr<Linear> fc1_, fc2_;
};

}  // namespace

ViTAttention::ViTAttention(const ViTConfig& c)
    : heads_(c.num_heads), head_dim_(c.num_heads > 0 ? c.embed_dim / c.num_heads : 0) {
  LATHE_CHECK(c.num_heads > 0 && c.embed_dim % c.num_heads == 0, "[vit] embed_dim ", c.embed_dim,
              " is not a multiple of num_heads ", c.num_heads);
  qkv_ = register_module("qkv", make<Linear>(c.embed_dim, 3 * c.embed_dim, c.qkv_bias));
  register_module("q_norm", make<Identity>());
  register_module("k_norm", make<Identity>());
  register_module("attn_drop", make<Dropout>(0.0));
  proj_ = register_module("proj", make<Linear>(c.embed_dim, c.embed_dim));
  register_module("proj_drop", make<Dropout>(0.0));
}

Tensor ViTAttention::forward(const Tensor& x) {
  const int64_t b = x.shape()[0], n = x.shape()[1], d = x.shape()[2];
  // [B, N, 3, H, hd] -> [3, B, H, N, hd]
  Tensor qkv = qkv_->forward(x).reshape({b, n, 3, heads_, head_dim_}).permute({2, 0, 3, 1, 4});
  Tensor ctx = scaled_dot_product_attention(qkv.select(0, 0), qkv.select(0, 1), qkv.select(0, 2));
  return proj_->forward(ctx.transpose(1, 2).reshape({b, n, d}));
}

ViTBlock::ViTBlock(const ViTConfig& c) {
  norm1_ = register_module("norm1", make<LayerNorm>(std::vector<int64_t>{c.embed_dim}, c.eps));
  attn_ = register_module("attn", make<ViTAttention>(c));
  register_module("ls1", make<Identity>());
  register_module("drop_path1", make<Identity>());
  norm2_ = register_module("norm2", make<LayerNorm>(std::vector<int64_t>{c.embed_dim}, c.eps));
  mlp_ = register_module(
      "mlp", make<Mlp>(c.embed_dim, static_cast<int64_t>(double(c.embed_dim) * c.mlp_ratio)));
  register_module("ls2", make<Identity>());
  register_module("drop_path2", make<Identity>());
}

Tensor ViTBlock::forward(const Tensor& x) {
  Tensor y = add(x, attn_->forward(norm1_->forward(x)));
  return add(y, mlp_->forward(norm2_->forward(y)));
}

VisionTransformer::VisionTransformer(ViTConfig c) : c_(c) {
  LATHE_CHECK(c.patch_size > 0 && c.img_size % c.patch_size == 0, "[vit] image size ", c.img_size,
              " is not a multiple of patch size ", c.patch_size);
  const int64_t num_patches = (c.img_size / c.patch_size) * (c.img_size / c.patch_size);
  // timm registers cls_token and pos_embed on the root, before the blocks.
  init::normal_(register_parameter("cls_token", empty({1, 1, c.embed_dim})), 0.0, 1e-6);
  init::trunc_normal_(register_parameter("pos_embed", empty({1, num_patches + 1, c.embed_dim})),
                      0.0, 0.02);
  auto patch_embed = register_module("patch_embed", make<PatchEmbed>(c));
  proj_ = patch_embed->child("proj");
  register_module("pos_drop", make<Dropout>(0.0));
  register_module("patch_drop", make<Identity>());
  register_module("norm_pre", make<Identity>());
  auto blocks = make<Sequential>();
  for (int64_t i = 0; i < c.depth; ++i) blocks->push_back(make<ViTBlock>(c));
  blocks_ = register_module("blocks", blocks);
  norm_ = register_module("norm", make<LayerNorm>(std::vector<int64_t>{c.embed_dim}, c.eps));
  register_module("fc_norm", make<Identity>());
  register_module("head_drop", make<Dropout>(0.0));
  if (c.num_classes > 0)
    head_ = register_module("head", make<Linear>(c.embed_dim, c.num_classes));
  else
    head_ = register_module("head", make<Identity>());
  // timm: trunc_normal_(std 0.02) on Linear weights, zero biases.
  apply([](const std::string&, Module& m) {
    if (m.type_name() != "Linear") return;
    init::trunc_normal_(m.param("weight"), 0.0, 0.02);
    for (auto& [pn, p] : m.named_parameters())
      if (pn == "bias") init::constant_(p, 0.0);
  });
}

Tensor VisionTransformer::forward(const Tensor& x) {
  LATHE_CHECK(
      x.defined() && x.dim() == 4 && x.shape()[2] == c_.img_size && x.shape()[3] == c_.img_size,
      "[vit] expects images [B, ", c_.in_chans, ", ", c_.img_size, ", ", c_.img_size, "], got ",
      x.defined() ? x.shape_string() : "undefined");
  const int64_t b = x.shape()[0];
  Tensor t = proj_->forward(x).flatten(2).transpose(1, 2);  // [B, N, D]
  Tensor cls = param("cls_token").expand({b, 1, c_.embed_dim});
  t = add(cat({cls, t}, 1), param("pos_embed"));
  t = norm_->forward(blocks_->forward(t));
  return head_->forward(t.select(1, 0));
}

std::shared_ptr<VisionTransformer> vit(ViTConfig c) { return make<VisionTransformer>(c); }

std::shared_ptr<VisionTransformer> vit_base_patch16_224(int64_t num_classes) {
  ViTConfig c = vit_base_patch16_224_config();
  c.num_classes = num_classes;
  return vit(c);
}

std::shared_ptr<VisionTransformer> vit_small_patch16_224(int64_t num_classes) {
  ViTConfig c = vit_small_patch16_224_config();
  c.num_classes = num_classes;
  return vit(c);
}

}  // namespace lathe::models
