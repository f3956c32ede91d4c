// A fused chain of f32 pointwise ops, run in one pass over memory: the cpu backend's
// fuse_pointwise pass turns a group of pointwise nodes into one `pointwise_fused` node holding a
// program of these instructions. Each instruction defines one register (SSA: register k is
// instruction k); the last one is the result. run_pointwise evaluates the program over tiles of
// 256 elements: a register is a tile buffer (inputs are read in place, the last instruction
// writes straight into the output), so every loop is a plain, vectorized loop over floats and the
// data of a tile stay in L1 between instructions.
//
// The program's text form (a node attribute, printed in graph dumps) is one instruction per
// ';': "in 0; in 1; add %0 %1 1; relu %2" (operands are registers, then the constants).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lathe/core/tensor.h"

namespace lathe::kernels {

enum class PwOp : uint8_t {
  input,        // c: input index
  constant,     // c0
  add,          // a + c0 * b (c0 is add's alpha; 1 for a plain add)
  sub,          // a - c0 * b
  mul,          // a * b
  div,          // a / b
  maximum,      // max(a, b), NaN if either is
  minimum,      // min(a, b), NaN if either is
  scale,        // a * c0
  neg,          // -a
  relu,         // a > 0 ? a : 0 (NaN stays NaN)
  sigmoid,      // 1 / (1 + exp(-a))
  tanh,         // tanh(a)
  exp,          // exp(a)
  gelu_erf,     // 0.5 a (1 + erf(a / sqrt 2))
  gelu_tanh,    // 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3)))
  clamp,        // min(max(a, c0), c1) (c0 = -inf / c1 = +inf when a bound is absent)
  hardswish,    // a * clamp(a + 3, 0, 6) / 6
  hardsigmoid,  // clamp(a + 3, 0, 6) / 6
};

// The name of an instruction in the text form ("add", "gelu_erf", ...).
const char* pw_op_name(PwOp op);
// Number of register operands (0 for input and constant, 2 for the binary ops, else 1).
int pw_arity(PwOp op);

struct PwInstr {
  PwOp op = PwOp::input;
  int32_t a = -1, b = -1;  // operand registers
  int32_t input = -1;      // PwOp::input: which input
  double c0 = 0, c1 = 0;   // constants (see PwOp)
};

struct PointwiseProgram {
  std::vector<PwInstr> code;
  int num_inputs = 0;

  // The text form; parse(to_string()) gives the program back.
  std::string to_string() const;
  // Parses the text form; throws lathe::Error naming what is wrong (an unknown op, a register
  // used before it is defined, an input index out of range). num_inputs < 0: not checked, and
  // the program's num_inputs is one past the largest input it reads.
  static PointwiseProgram parse(const std::string& text, int num_inputs = -1);
};

// out = program(inputs) elementwise. out is f32 and dense in any dimension order; each input is
// f32 and broadcasts to out's sizes (inputs with out's exact layout, and single elements, are
// read in place; others are first copied into out's layout).
void run_pointwise(const PointwiseProgram& program, std::span<const Tensor> inputs,
                   const Tensor& out);

}  // namespace lathe::kernels
