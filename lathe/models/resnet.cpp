#include "lathe/models/resnet.h"

#include "lathe/nn/init.h"
#include "lathe/ops/ops.h"

namespace lathe::models {

using namespace lathe::nn;

BasicBlock::BasicBlock(int64_t inplanes, int64_t planes, int64_t stride, ModulePtr downsample) {
  conv1_ = register_module("conv1", make<Conv2d>(inplanes, planes, 3, stride, 1, 1, false));
  bn1_ = register_module("bn1", make<BatchNorm2d>(planes));
  register_module("relu", make<ReLU>());
  conv2_ = register_module("conv2", make<Conv2d>(planes, planes, 3, 1, 1, 1, false));
  bn2_ = register_module("bn2", make<BatchNorm2d>(planes));
  if (downsample) downsample_ = register_module("downsample", downsample);
}

Tensor BasicBlock::forward(const Tensor& x) {
  Tensor identity = downsample_ ? downsample_->forward(x) : x;
  Tensor out = relu(bn1_->forward(conv1_->forward(x)));
  out = bn2_->forward(conv2_->forward(out));
  return relu(add(out, identity));
}

Bottleneck::Bottleneck(int64_t inplanes, int64_t planes, int64_t stride, ModulePtr downsample,
                       int64_t groups, int64_t base_width) {
  int64_t width = planes * base_width / 64 * groups;
  conv1_ = register_module("conv1", make<Conv2d>(inplanes, width, 1, 1, 0, 1, false));
  bn1_ = register_module("bn1", make<BatchNorm2d>(width));
  conv2_ = register_module("conv2", make<Conv2d>(width, width, 3, stride, 1, groups, false));
  bn2_ = register_module("bn2", make<BatchNorm2d>(width));
  conv3_ = register_module("conv3", make<Conv2d>(width, planes * kExpansion, 1, 1, 0, 1, false));
  bn3_ = register_module("bn3", make<BatchNorm2d>(planes * kExpansion));
  register_module("relu", make<ReLU>());
  if (downsample) downsample_ = register_module("downsample", downsample);
}

Tensor Bottleneck::forward(const Tensor& x) {
  Tensor identity = downsample_ ? downsample_->forward(x) : x;
  Tensor out = relu(bn1_->forward(conv1_->forward(x)));
  out = relu(bn2_->forward(conv2_->forward(out)));
  out = bn3_->forward(conv3_->forward(out));
  return relu(add(out, identity));
}

ResNet::ResNet(bool bottleneck, std::vector<int64_t> layers, int64_t num_classes, int64_t groups,
               int64_t width_per_group)
    : groups_(groups), base_width_(width_per_group) {
  LATHE_CHECK(layers.size() == 4, "[ResNet] needs 4 stage depths, got ", layers);
  LATHE_CHECK(bottleneck || (groups == 1 && width_per_group == 64),
              "[ResNet] BasicBlock supports only groups=1, width_per_group=64");
  const int64_t expansion = bottleneck ? Bottleneck::kExpansion : BasicBlock::kExpansion;
  body_.push_back(register_module("conv1", make<Conv2d>(3, 64, 7, 2, 3, 1, false)));
  body_.push_back(register_module("bn1", make<BatchNorm2d>(64)));
  body_.push_back(register_module("relu", make<ReLU>()));
  body_.push_back(register_module("maxpool", make<MaxPool2d>(3, 2, 1)));
  const int64_t planes[4] = {64, 128, 256, 512};
  for (int i = 0; i < 4; ++i) {
    auto layer = make_layer(bottleneck, planes[i], layers[i], i == 0 ? 1 : 2);
    body_.push_back(register_module("layer" + std::to_string(i + 1), layer));
  }
  body_.push_back(register_module("avgpool", make<AdaptiveAvgPool2d>(std::vector<int64_t>{1, 1})));
  fc_ = register_module("fc", make<Linear>(512 * expansion, num_classes));
  // torchvision: kaiming_normal_(fan_out, relu) for convs; BatchNorm 1 / 0 (its default).
  apply([](const std::string&, Module& m) {
    if (m.type_name() == "Conv2d") init::kaiming_normal_(m.param("weight"), 0.0, false);
  });
}

std::shared_ptr<Sequential> ResNet::make_layer(bool bottleneck, int64_t planes, int64_t blocks,
                                               int64_t stride) {
  const int64_t expansion = bottleneck ? Bottleneck::kExpansion : BasicBlock::kExpansion;
  ModulePtr downsample;
  if (stride != 1 || inplanes_ != planes * expansion) {
    downsample = make<Sequential>(
        std::vector<ModulePtr>{make<Conv2d>(inplanes_, planes * expansion, 1, stride, 0, 1, false),
                               make<BatchNorm2d>(planes * expansion)});
  }
  auto seq = make<Sequential>();
  for (int64_t i = 0; i < blocks; ++i) {
    int64_t s = i == 0 ? stride : 1;
    ModulePtr ds = i == 0 ? downsample : nullptr;
    if (bottleneck)
      seq->push_back(make<Bottleneck>(inplanes_, planes, s, ds, groups_, base_width_));
    else
      seq->push_back(make<BasicBlock>(inplanes_, planes, s, ds));
    inplanes_ = planes * expansion;
  }
  return seq;
}

Tensor ResNet::forward(const Tensor& x) {
  Tensor y = x;
  for (auto& m : body_) y = m->forward(y);
  return fc_->forward(y.flatten(1));
}

std::shared_ptr<ResNet> resnet18(int64_t num_classes) {
  return make<ResNet>(false, std::vector<int64_t>{2, 2, 2, 2}, num_classes);
}
std::shared_ptr<ResNet> resnet50(int64_t num_classes) {
  return make<ResNet>(true, std::vector<int64_t>{3, 4, 6, 3}, num_classes);
}
std::shared_ptr<ResNet> resnext50_32x4d(int64_t num_classes) {
  return make<ResNet>(true, std::vector<int64_t>{3, 4, 6, 3}, num_classes, 32, 4);
}

}  // namespace lathe::models
