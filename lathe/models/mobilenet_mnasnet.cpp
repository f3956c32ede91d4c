#include "lathe/models/mobilenet_mnasnet.h"

#include <cmath>

#include "lathe/nn/init.h"
#include "lathe/ops/ops.h"

namespace lathe::models {

using namespace lathe::nn;

namespace {

// torchvision's init for MobileNetV2 / MNASNet convs and classifiers.
void init_convs_fan_out(Module& root) {
  root.apply([](const std::string&, Module& m) {
    if (m.type_name() == "Conv2d") init::kaiming_normal_(m.param("weight"), 0.0, false);
  });
}

}  // namespace

std::shared_ptr<Sequential> conv_norm_activation(int64_t in, int64_t out, int64_t kernel,
                                                 int64_t stride, int64_t groups, bool relu6,
                                                 double bn_momentum) {
  ModulePtr act = relu6 ? ModulePtr(make<ReLU6>()) : ModulePtr(make<ReLU>());
  return make<Sequential>(
      std::vector<ModulePtr>{make<Conv2d>(in, out, kernel, stride, (kernel - 1) / 2, groups, false),
                             make<BatchNorm2d>(out, 1e-5, bn_momentum), act});
}

// ---------------------------------------------------------------- MobileNetV2

InvertedResidual::InvertedResidual(int64_t inp, int64_t oup, int64_t stride, int64_t expand_ratio)
    : use_res_connect_(stride == 1 && inp == oup) {
  LATHE_CHECK(stride == 1 || stride == 2, "[InvertedResidual] stride must be 1 or 2, got ", stride);
  int64_t hidden = inp * expand_ratio;
  auto seq = make<Sequential>();
  if (expand_ratio != 1) seq->push_back(conv_norm_activation(inp, hidden, 1));
  seq->push_back(conv_norm_activation(hidden, hidden, 3, stride, hidden));
  seq->push_back(make<Conv2d>(hidden, oup, 1, 1, 0, 1, false));
  seq->push_back(make<BatchNorm2d>(oup));
  conv_ = register_module("conv", seq);
}

Tensor InvertedResidual::forward(const Tensor& x) {
  Tensor y = conv_->forward(x);
  return use_res_connect_ ? add(x, y) : y;
}

MobileNetV2::MobileNetV2(int64_t num_classes, double dropout) {
  // (expansion t, channels c, repeats n, first stride s) at width 1.0.
  const int64_t setting[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                                 {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  int64_t in = 32;
  const int64_t last = 1280;
  auto features = make<Sequential>();
  features->push_back(conv_norm_activation(3, in, 3, 2));
  for (const auto& row : setting) {
    for (int64_t i = 0; i < row[2]; ++i) {
      features->push_back(make<InvertedResidual>(in, row[1], i == 0 ? row[3] : 1, row[0]));
      in = row[1];
    }
  }
  features->push_back(conv_norm_activation(in, last, 1));
  features_ = register_module("features", features);
  classifier_ =
      register_module("classifier", make<Sequential>(std::vector<ModulePtr>{
                                        make<Dropout>(dropout), make<Linear>(last, num_classes)}));
  init_convs_fan_out(*this);
  auto fc = (*classifier_)[1];
  init::normal_(fc->param("weight"), 0.0, 0.01);
  init::constant_(fc->param("bias"), 0.0);
}

Tensor MobileNetV2::forward(const Tensor& x) {
  Tensor y = adaptive_avg_pool2d(features_->forward(x), {1, 1});
  return classifier_->forward(y.flatten(1));
}

// ---------------------------------------------------------------- MNASNet

MNASInvertedResidual::MNASInvertedResidual(int64_t in, int64_t out, int64_t kernel, int64_t stride,
                                           int64_t expansion, double bn_momentum)
    : apply_residual_(in == out && stride == 1) {
  int64_t mid = in * expansion;
  layers_ = register_module(
      "layers",
      make<Sequential>(std::vector<ModulePtr>{
          make<Conv2d>(in, mid, 1, 1, 0, 1, false), make<BatchNorm2d>(mid, 1e-5, bn_momentum),
          make<ReLU>(), make<Conv2d>(mid, mid, kernel, stride, kernel / 2, mid, false),
          make<BatchNorm2d>(mid, 1e-5, bn_momentum), make<ReLU>(),
          make<Conv2d>(mid, out, 1, 1, 0, 1, false), make<BatchNorm2d>(out, 1e-5, bn_momentum)}));
}

Tensor MNASInvertedResidual::forward(const Tensor& x) {
  Tensor y = layers_->forward(x);
  return apply_residual_ ? add(y, x) : y;
}

MNASNet::MNASNet(int64_t num_classes, double dropout) {
  const double m = 1.0 - 0.9997;  // torchvision ports TensorFlow's decay 0.9997
  const int64_t d[8] = {32, 16, 24, 40, 80, 96, 192, 320};
  auto stack = [&](int64_t in, int64_t out, int64_t k, int64_t s, int64_t e, int64_t n) {
    auto seq = make<Sequential>();
    seq->push_back(make<MNASInvertedResidual>(in, out, k, s, e, m));
    for (int64_t i = 1; i < n; ++i)
      seq->push_back(make<MNASInvertedResidual>(out, out, k, 1, e, m));
    return seq;
  };
  layers_ = register_module(
      "layers",
      make<Sequential>(std::vector<ModulePtr>{
          make<Conv2d>(3, d[0], 3, 2, 1, 1, false), make<BatchNorm2d>(d[0], 1e-5, m), make<ReLU>(),
          make<Conv2d>(d[0], d[0], 3, 1, 1, d[0], false), make<BatchNorm2d>(d[0], 1e-5, m),
          make<ReLU>(), make<Conv2d>(d[0], d[1], 1, 1, 0, 1, false),
          make<BatchNorm2d>(d[1], 1e-5, m), stack(d[1], d[2], 3, 2, 3, 3),
          stack(d[2], d[3], 5, 2, 3, 3), stack(d[3], d[4], 5, 2, 6, 3),
          stack(d[4], d[5], 3, 1, 6, 2), stack(d[5], d[6], 5, 2, 6, 4),
          stack(d[6], d[7], 3, 1, 6, 1), make<Conv2d>(d[7], 1280, 1, 1, 0, 1, false),
          make<BatchNorm2d>(1280, 1e-5, m), make<ReLU>()}));
  classifier_ =
      register_module("classifier", make<Sequential>(std::vector<ModulePtr>{
                                        make<Dropout>(dropout), make<Linear>(1280, num_classes)}));
  init_convs_fan_out(*this);
  // torchvision: kaiming_uniform_(fan_out, sigmoid gain 1) on the classifier, zero bias.
  auto fc = (*classifier_)[1];
  init::kaiming_uniform_(fc->param("weight"), 1.0, false);
  init::constant_(fc->param("bias"), 0.0);
}

Tensor MNASNet::forward(const Tensor& x) {
  return classifier_->forward(mean(layers_->forward(x), {2, 3}));
}

std::shared_ptr<MobileNetV2> mobilenet_v2(int64_t num_classes) {
  return make<MobileNetV2>(num_classes);
}
std::shared_ptr<MNASNet> mnasnet1_0(int64_t num_classes) { return make<MNASNet>(num_classes); }

}  // namespace lathe::models
