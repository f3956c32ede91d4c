// The differential fuzzer of lathe::compile (compile_fuzz_test.cpp): random small programs over
// the op table, run by a module so compile(module) sees parameters, buffers and children, and
// random call sequences. This header holds the program model: what a program is, how one is
// generated, run and printed.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "lathe/core/tensor.h"
#include "lathe/nn/layers.h"

namespace lathe::fuzz {

// Generator features that find bugs still open in issue 10: off by default so CI passes on the
// current code; turn one on (LATHE_FUZZ_ENABLE=name,name or "all") to reproduce, and enable it
// for good once the fix lands (see docs/trace.md, "The differential fuzzer").
enum class Feature {
  kParamAssign,           // item 1: replace a parameter through param(name) = t
  kLambdaModule,          // item 2: compile a lambda that calls the module (not compile(module))
  kFactoryOutput,         // item 3: return a tensor made by a factory inside the function
  kNegativeIndex,         // item 5: select/slice with a negative (end-relative) index or bound
  kSymbolicIndex,         // item 5: select index 1, slice start 1 or step 2 on a symbolic dim
  kReshapeNonContiguous,  // issue 11: reshape({-1, D}) of a non-contiguous value (when off,
                          // flatten reshapes a.contiguous() and args stay contiguous)
  kDynamicLastDim,        // item 5: kDynamic with D symbolic (matmul/linear/reshape pin it late);
                          // when off, the kDynamic variant marks D static (mark_static)
  kZeroSizeReshape,       // item 5: a zero-size call to a program with reshape({-1, D}) (the -1
                          // pins the other dims' symbols late); when off, such programs get no 0s
  kSoftmaxLayout,   // not in issue 10 yet: softmax over a non-last dim, then reshape (eager returns
                    // a permuted layout the tracer takes for row-major); when off, dim -1
  kDynamicTrainBn,  // item 6: DynamicPolicy::kDynamic with a train-mode BatchNorm
};
const char* feature_name(Feature f);
// The features turned on for this run: none unless LATHE_FUZZ_ENABLE names them.
std::set<Feature> enabled_features();

enum class OpKind {
  kUnary,        // relu, neg, tanh, sigmoid, abs, gelu (name)
  kScalar,       // mul / add by scalar s (name)
  kBinary,       // add, mul, sub, maximum (name) of a and b (b broadcasts to a)
  kTranspose,    // a.transpose(i0, i1)
  kUnsqueeze,    // a.unsqueeze(i0)
  kSelect,       // a.select(i0, i1)
  kSlice,        // a.slice(i0, i1, i2, step s)
  kFlatten,      // a.reshape({-1, D}); a.contiguous().reshape({-1, D}) when i0 is 1
  kUnflatten,    // a.reshape(b.sizes()): undoes a kFlatten of b
  kReduce,       // sum / mean / amax (name) over dim i0, keepdim i1
  kSoftmax,      // softmax(a, i0)
  kMatmulParam,  // matmul(a, module.w)
  kLinear,       // module.lin(a)
  kConvBlock,    // mean(module.bn(module.conv(a.unsqueeze(1))), 1): conv + batch norm
  kAddInplace,   // add_(a, b)
  kMulInplace,   // mul_(a, s)
  kReluInplace,  // relu_(a)
  kFactory,      // full({D}, s): made inside the function
  kBranch,       // sum(a).item() > 0 ? relu(a) : mul(a, s): a branch on data (a graph break)
};

// One step: reads values a (and b), writes the next value.
struct Step {
  OpKind kind;
  int a = -1, b = -1;
  int64_t i0 = 0, i1 = 0, i2 = 0;
  double s = 0;
  std::string name;
};

// Values 0 and 1 are the arguments; step k writes value 2 + k. The function returns `outputs`.
struct Program {
  int64_t d = 4;                // the fixed last size of both arguments
  bool arg1_broadcast = false;  // arg1 is [D] instead of arg0's [B, S, D]
  std::vector<Step> steps;
  std::vector<int> outputs;
  std::string to_string() const;
};

// Generates a program of about `num_steps` steps.
Program generate_program(std::mt19937_64& rng, int num_steps, const std::set<Feature>& features);
// p with `step` inserted before step k (its value is 2 + k; later values move up by one) and
// returned too.
Program insert_step(const Program& p, size_t k, const Step& step);

// Removes step k and every step and output that depends on it (values renumbered); when no
// output is left, the last value is returned.
Program drop_step(const Program& p, size_t k);

// The module a program runs in: a parameter w [D,D], children lin (Linear), conv (Conv2d 1->2,
// 3x3, padding 1) and bn (BatchNorm2d(2)). forward_all interprets the program.
class FuzzModule : public nn::Module {
 public:
  FuzzModule(std::shared_ptr<const Program> program, uint64_t seed);
  std::vector<Tensor> forward_all(const std::vector<Tensor>& inputs) override;
  std::string type_name() const override { return "FuzzModule"; }

 private:
  std::shared_ptr<const Program> program_;
};

// Runs the program on the inputs with the module's parameters and children.
std::vector<Tensor> run_program(const Program& p, nn::Module& m, const std::vector<Tensor>& in);

}  // namespace lathe::fuzz
