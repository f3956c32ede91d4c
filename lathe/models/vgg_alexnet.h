// torchvision AlexNet and VGG-16 (no batch norm): features, avgpool, classifier.
#pragma once

#include <memory>

#include "lathe/nn/layers.h"

namespace lathe::models {

// features -> AdaptiveAvgPool2d(size) -> flatten -> classifier; shared by AlexNet and VGG.
class FeatureClassifierNet : public nn::Module {
 public:
  FeatureClassifierNet(std::string type, std::shared_ptr<nn::Sequential> features,
                       int64_t pool_size, std::shared_ptr<nn::Sequential> classifier);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return type_; }

 private:
  std::string type_;
  std::shared_ptr<nn::Sequential> features_, classifier_;
  nn::ModulePtr avgpool_;
};

std::shared_ptr<FeatureClassifierNet> alexnet(int64_t num_classes = 1000, double dropout = 0.5);
std::shared_ptr<FeatureClassifierNet> vgg16(int64_t num_classes = 1000, double dropout = 0.5);

}  // namespace lathe::models
