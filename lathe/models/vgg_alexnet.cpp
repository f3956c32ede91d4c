#include "lathe/models/vgg_alexnet.h"

#include "lathe/nn/init.h"

namespace lathe::models {

using namespace lathe::nn;

FeatureClassifierNet::FeatureClassifierNet(std::string type, std::shared_ptr<Sequential> features,
                                           int64_t pool_size,
                                           std::shared_ptr<Sequential> classifier)
    : type_(std::move(type)) {
  features_ = register_module("features", std::move(features));
  avgpool_ = register_module("avgpool",
                             make<AdaptiveAvgPool2d>(std::vector<int64_t>{pool_size, pool_size}));
  classifier_ = register_module("classifier", std::move(classifier));
}

Tensor FeatureClassifierNet::forward(const Tensor& x) {
  return classifier_->forward(avgpool_->forward(features_->forward(x)).flatten(1));
}

std::shared_ptr<FeatureClassifierNet> alexnet(int64_t num_classes, double dropout) {
  auto features = make<Sequential>(std::vector<ModulePtr>{
      make<Conv2d>(3, 64, 11, 4, 2), make<ReLU>(), make<MaxPool2d>(3, 2),
      make<Conv2d>(64, 192, 5, 1, 2), make<ReLU>(), make<MaxPool2d>(3, 2),
      make<Conv2d>(192, 384, 3, 1, 1), make<ReLU>(), make<Conv2d>(384, 256, 3, 1, 1), make<ReLU>(),
      make<Conv2d>(256, 256, 3, 1, 1), make<ReLU>(), make<MaxPool2d>(3, 2)});
  auto classifier = make<Sequential>(std::vector<ModulePtr>{
      make<Dropout>(dropout), make<Linear>(256 * 6 * 6, 4096), make<ReLU>(), make<Dropout>(dropout),
      make<Linear>(4096, 4096), make<ReLU>(), make<Linear>(4096, num_classes)});
  return make<FeatureClassifierNet>("AlexNet", features, 6, classifier);
}

std::shared_ptr<FeatureClassifierNet> vgg16(int64_t num_classes, double dropout) {
  const int64_t cfg[] = {64, 64,  0,   128, 128, 0,   256, 256, 256,
                         0,  512, 512, 512, 0,   512, 512, 512, 0};  // 0 = max pool
  auto features = make<Sequential>();
  int64_t in = 3;
  for (int64_t v : cfg) {
    if (v == 0) {
      features->push_back(make<MaxPool2d>(2, 2));
    } else {
      auto conv = make<Conv2d>(in, v, 3, 1, 1);
      // torchvision: kaiming_normal_(fan_out, relu), zero bias.
      init::kaiming_normal_(conv->param("weight"), 0.0, false);
      init::constant_(conv->param("bias"), 0.0);
      features->push_back(conv);
      features->push_back(make<ReLU>());
      in = v;
    }
  }
  auto classifier = make<Sequential>(
      std::vector<ModulePtr>{make<Linear>(512 * 7 * 7, 4096), make<ReLU>(), make<Dropout>(dropout),
                             make<Linear>(4096, 4096), make<ReLU>(), make<Dropout>(dropout),
                             make<Linear>(4096, num_classes)});
  for (auto& [name, m] : classifier->named_children()) {
    if (m->type_name() != "Linear") continue;
    init::normal_(m->param("weight"), 0.0, 0.01);
    init::constant_(m->param("bias"), 0.0);
  }
  return make<FeatureClassifierNet>("VGG", features, 7, classifier);
}

}  // namespace lathe::models
