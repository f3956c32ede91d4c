// torchvision SqueezeNet 1.1: features (Fire modules), classifier (dropout, final conv, relu,
// adaptive average pool).
#pragma once

#include <memory>

#include "lathe/nn/layers.h"

namespace lathe::models {

class Fire : public nn::Module {
 public:
  Fire(int64_t in, int64_t squeeze, int64_t expand1x1, int64_t expand3x3);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Fire"; }

 private:
  std::shared_ptr<nn::Conv2d> squeeze_, expand1x1_, expand3x3_;
};

class SqueezeNet : public nn::Module {
 public:
  explicit SqueezeNet(int64_t num_classes = 1000, double dropout = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "SqueezeNet"; }

 private:
  std::shared_ptr<nn::Sequential> features_, classifier_;
};

std::shared_ptr<SqueezeNet> squeezenet1_1(int64_t num_classes = 1000);

}  // namespace lathe::models
