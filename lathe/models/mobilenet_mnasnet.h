// torchvision MobileNetV2 (width 1.0) and MNASNet 1.0, with torchvision's state_dict names.
#pragma once

#include <memory>

#include "lathe/nn/layers.h"

namespace lathe::models {

// Conv2d (no bias) -> BatchNorm2d -> activation as a Sequential (children 0, 1, 2), as
// torchvision's Conv2dNormActivation. relu6 selects ReLU6 over ReLU.
std::shared_ptr<nn::Sequential> conv_norm_activation(int64_t in, int64_t out, int64_t kernel,
                                                     int64_t stride = 1, int64_t groups = 1,
                                                     bool relu6 = true, double bn_momentum = 0.1);

// MobileNetV2 InvertedResidual: child "conv" (a Sequential); residual when shapes allow.
class InvertedResidual : public nn::Module {
 public:
  InvertedResidual(int64_t inp, int64_t oup, int64_t stride, int64_t expand_ratio);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "InvertedResidual"; }

 private:
  bool use_res_connect_;
  std::shared_ptr<nn::Sequential> conv_;
};

class MobileNetV2 : public nn::Module {
 public:
  explicit MobileNetV2(int64_t num_classes = 1000, double dropout = 0.2);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "MobileNetV2"; }

 private:
  std::shared_ptr<nn::Sequential> features_, classifier_;
};

// MNASNet's _InvertedResidual: child "layers" (a Sequential of 8).
class MNASInvertedResidual : public nn::Module {
 public:
  MNASInvertedResidual(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t expansion,
                       double bn_momentum);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "_InvertedResidual"; }

 private:
  bool apply_residual_;
  std::shared_ptr<nn::Sequential> layers_;
};

class MNASNet : public nn::Module {
 public:
  explicit MNASNet(int64_t num_classes = 1000, double dropout = 0.2);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "MNASNet"; }

 private:
  std::shared_ptr<nn::Sequential> layers_, classifier_;
};

std::shared_ptr<MobileNetV2> mobilenet_v2(int64_t num_classes = 1000);
std::shared_ptr<MNASNet> mnasnet1_0(int64_t num_classes = 1000);

}  // namespace lathe::models
