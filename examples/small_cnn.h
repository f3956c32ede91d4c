// The small CNN of examples/train_small.cpp and of the convergence test against PyTorch
// (tests/autograd/test_convergence.cpp; tests/oracle/gen_train.py builds the same layers as a
// torch.nn.Sequential, so the parameter names "0.weight", "1.bias", ... agree).
#pragma once

#include <memory>

#include "lathe/nn/layers.h"
#include "lathe/nn/module.h"

namespace lathe::examples {

// [N, 1, 8, 8] images -> [N, 2] logits.
inline std::shared_ptr<nn::Sequential> small_cnn() {
  auto m = nn::make<nn::Sequential>();
  m->push_back(nn::make<nn::Conv2d>(1, 4, 3, 1, 1));
  m->push_back(nn::make<nn::BatchNorm2d>(4));
  m->push_back(nn::make<nn::ReLU>());
  m->push_back(nn::make<nn::MaxPool2d>(2));
  m->push_back(nn::make<nn::Conv2d>(4, 8, 3, 1, 1));
  m->push_back(nn::make<nn::ReLU>());
  m->push_back(nn::make<nn::AdaptiveAvgPool2d>(std::vector<int64_t>{1, 1}));
  m->push_back(nn::make<nn::Flatten>(1));
  m->push_back(nn::make<nn::Linear>(8, 2));
  return m;
}

}  // namespace lathe::examples
