// Lathe's public API in one header: `#include <lathe/lathe.h>` and link Lathe::lathe.
//
//   #include <lathe/lathe.h>
//   int main() {
//     auto f = lathe::compile([](const lathe::Tensor& x) { return lathe::relu(x) * 2.0; });
//     lathe::Tensor y = f(lathe::randn({2, 3}));
//   }
//
// Each header below also stands alone, for programs that want less. Including this header (or
// lathe/ops/ops.h, lathe/lazy/lazy.h) in any one file of a program is what registers Tensor's op
// members and the lazy device with core: no linker flag is needed, in any build system.
#pragma once

#include "lathe/base/version.h"
#include "lathe/core/device.h"
#include "lathe/core/dtype.h"
#include "lathe/core/error.h"
#include "lathe/core/grad_mode.h"
#include "lathe/core/random.h"
#include "lathe/core/tensor.h"
#include "lathe/core/threads.h"
#include "lathe/core/version.h"
#include "lathe/data/array_dataset.h"
#include "lathe/data/cifar10.h"
#include "lathe/data/data_loader.h"
#include "lathe/data/image_folder.h"
#include "lathe/data/mnist.h"
#include "lathe/data/npy.h"
#include "lathe/data/sampler.h"
#include "lathe/distributed/ddp.h"
#include "lathe/distributed/process_group.h"
#include "lathe/io/safetensors.h"
#include "lathe/lazy/lazy.h"
#include "lathe/models/registry.h"
#include "lathe/nn/init.h"
#include "lathe/nn/layers.h"
#include "lathe/nn/module.h"
#include "lathe/ops/autocast.h"
#include "lathe/ops/autograd.h"
#include "lathe/ops/ops.h"
#include "lathe/optim/lr_scheduler.h"
#include "lathe/optim/optimizer.h"
#include "lathe/trace/compile.h"
#include "lathe/trace/control_flow.h"
