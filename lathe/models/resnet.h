// torchvision ResNet / ResNeXt (v1.5: stride on the 3x3 conv), with torchvision's state_dict
// names: conv1, bn1, layer1.0.conv1, layer1.0.downsample.0, ..., fc.
#pragma once

#include <memory>
#include <vector>

#include "lathe/nn/layers.h"

namespace lathe::models {

class BasicBlock : public nn::Module {
 public:
  static constexpr int64_t kExpansion = 1;
  BasicBlock(int64_t inplanes, int64_t planes, int64_t stride, nn::ModulePtr downsample);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "BasicBlock"; }

 private:
  std::shared_ptr<nn::Conv2d> conv1_, conv2_;
  std::shared_ptr<nn::BatchNorm2d> bn1_, bn2_;
  nn::ModulePtr downsample_;
};

class Bottleneck : public nn::Module {
 public:
  static constexpr int64_t kExpansion = 4;
  Bottleneck(int64_t inplanes, int64_t planes, int64_t stride, nn::ModulePtr downsample,
             int64_t groups = 1, int64_t base_width = 64);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Bottleneck"; }

 private:
  std::shared_ptr<nn::Conv2d> conv1_, conv2_, conv3_;
  std::shared_ptr<nn::BatchNorm2d> bn1_, bn2_, bn3_;
  nn::ModulePtr downsample_;
};

class ResNet : public nn::Module {
 public:
  // bottleneck selects Bottleneck over BasicBlock; layers: blocks per stage.
  ResNet(bool bottleneck, std::vector<int64_t> layers, int64_t num_classes = 1000,
         int64_t groups = 1, int64_t width_per_group = 64);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ResNet"; }

 private:
  std::shared_ptr<nn::Sequential> make_layer(bool bottleneck, int64_t planes, int64_t blocks,
                                             int64_t stride);
  int64_t inplanes_ = 64, groups_, base_width_;
  std::vector<nn::ModulePtr> body_;  // conv1 .. avgpool in call order
  nn::ModulePtr fc_;
};

std::shared_ptr<ResNet> resnet18(int64_t num_classes = 1000);
std::shared_ptr<ResNet> resnet50(int64_t num_classes = 1000);
std::shared_ptr<ResNet> resnext50_32x4d(int64_t num_classes = 1000);

}  // namespace lathe::models
