#include "lathe/models/squeezenet.h"

#include "lathe/nn/init.h"
#include "lathe/ops/ops.h"

namespace lathe::models {

using namespace lathe::nn;

Fire::Fire(int64_t in, int64_t squeeze, int64_t expand1x1, int64_t expand3x3) {
  squeeze_ = register_module("squeeze", make<Conv2d>(in, squeeze, 1));
  register_module("squeeze_activation", make<ReLU>());
  expand1x1_ = register_module("expand1x1", make<Conv2d>(squeeze, expand1x1, 1));
  register_module("expand1x1_activation", make<ReLU>());
  expand3x3_ = register_module("expand3x3", make<Conv2d>(squeeze, expand3x3, 3, 1, 1));
  register_module("expand3x3_activation", make<ReLU>());
}

Tensor Fire::forward(const Tensor& x) {
  Tensor s = relu(squeeze_->forward(x));
  return cat({relu(expand1x1_->forward(s)), relu(expand3x3_->forward(s))}, 1);
}

SqueezeNet::SqueezeNet(int64_t num_classes, double dropout) {
  features_ = register_module(
      "features", make<Sequential>(std::vector<ModulePtr>{
                      make<Conv2d>(3, 64, 3, 2), make<ReLU>(), make<MaxPool2d>(3, 2, 0, true),
                      make<Fire>(64, 16, 64, 64), make<Fire>(128, 16, 64, 64),
                      make<MaxPool2d>(3, 2, 0, true), make<Fire>(128, 32, 128, 128),
                      make<Fire>(256, 32, 128, 128), make<MaxPool2d>(3, 2, 0, true),
                      make<Fire>(256, 48, 192, 192), make<Fire>(384, 48, 192, 192),
                      make<Fire>(384, 64, 256, 256), make<Fire>(512, 64, 256, 256)}));
  auto final_conv = make<Conv2d>(512, num_classes, 1);
  classifier_ =
      register_module("classifier", make<Sequential>(std::vector<ModulePtr>{
                                        make<Dropout>(dropout), final_conv, make<ReLU>(),
                                        make<AdaptiveAvgPool2d>(std::vector<int64_t>{1, 1})}));
  // torchvision: kaiming_uniform_ (a=0) on convs, N(0, 0.01) on the final conv, zero biases.
  apply([&](const std::string&, Module& m) {
    if (m.type_name() != "Conv2d") return;
    if (&m == final_conv.get())
      init::normal_(m.param("weight"), 0.0, 0.01);
    else
      init::kaiming_uniform_(m.param("weight"), 0.0, true);
    init::constant_(m.param("bias"), 0.0);
  });
}

Tensor SqueezeNet::forward(const Tensor& x) {
  return classifier_->forward(features_->forward(x)).flatten(1);
}

std::shared_ptr<SqueezeNet> squeezenet1_1(int64_t num_classes) {
  return make<SqueezeNet>(num_classes);
}

}  // namespace lathe::models
