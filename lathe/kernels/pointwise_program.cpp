#include "lathe/kernels/pointwise_program.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "lathe/core/threads.h"
#include "lathe/kernels/elementwise.h"
#include "lathe/kernels/parallel_chunks.h"
#include "lathe/kernels/vec_exp2.h"

namespace lathe::kernels {
namespace {

constexpr int64_t kTile = 256;

struct OpInfo {
  PwOp op;
  const char* name;
  int arity;
  int constants;  // how many of c0, c1 the text form carries
};

constexpr OpInfo kOps[] = {
    {PwOp::input, "in", 0, 0},
    {PwOp::constant, "const", 0, 1},
    {PwOp::add, "add", 2, 1},
    {PwOp::sub, "sub", 2, 1},
    {PwOp::mul, "mul", 2, 0},
    {PwOp::div, "div", 2, 0},
    {PwOp::maximum, "maximum", 2, 0},
    {PwOp::minimum, "minimum", 2, 0},
    {PwOp::scale, "scale", 1, 1},
    {PwOp::neg, "neg", 1, 0},
    {PwOp::relu, "relu", 1, 0},
    {PwOp::sigmoid, "sigmoid", 1, 0},
    {PwOp::tanh, "tanh", 1, 0},
    {PwOp::exp, "exp", 1, 0},
    {PwOp::gelu_erf, "gelu_erf", 1, 0},
    {PwOp::gelu_tanh, "gelu_tanh", 1, 0},
    {PwOp::clamp, "clamp", 1, 2},
    {PwOp::hardswish, "hardswish", 1, 0},
    {PwOp::hardsigmoid, "hardsigmoid", 1, 0},
};

const OpInfo& info(PwOp op) {
  for (const OpInfo& i : kOps)
    if (i.op == op) return i;
  throw Error("[pointwise_fused] unknown instruction code");
}

// ---- the math, scalar (tails) and eight lanes at a time (AVX2) ----

constexpr float kLog2e = 1.4426950408889634f;

inline float exp_scalar(float x) { return exp2_scalar(x * kLog2e); }
inline float sigmoid_scalar(float x) { return 1.0f / (1.0f + exp_scalar(-x)); }
// tanh(x) = 1 - 2 / (e^(2x) + 1): absolute error about 2e-7 (relative error grows near 0).
inline float tanh_scalar(float x) { return 1.0f - 2.0f / (exp_scalar(2.0f * x) + 1.0f); }
// erf by Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7), odd extension.
inline float erf_scalar(float x) {
  const float ax = std::fabs(x);
  const float t = 1.0f / (1.0f + 0.3275911f * ax);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  const float r = 1.0f - p * t * exp_scalar(-ax * ax);
  return std::copysign(r, x);
}

inline float gelu_erf_scalar(float x) {
  return 0.5f * x * (1.0f + erf_scalar(x * 0.70710678118654752f));
}
inline float gelu_tanh_scalar(float x) {
  return 0.5f * x * (1.0f + tanh_scalar(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

#ifdef LATHE_HAVE_VEC_EXP2
inline __m256 exp_avx2(__m256 x) { return exp2_avx2(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e))); }
inline __m256 sigmoid_avx2(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}
inline __m256 tanh_avx2(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = exp_avx2(_mm256_add_ps(x, x));
  return _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
}
inline __m256 erf_avx2(__m256 x) {
  const __m256 sign = _mm256_and_ps(x, _mm256_set1_ps(-0.0f));
  const __m256 ax = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), ax, one));
  __m256 p = _mm256_set1_ps(1.061405429f);
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
  const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(ax, ax)));
  const __m256 r = _mm256_fnmadd_ps(_mm256_mul_ps(p, t), e, one);
  return _mm256_or_ps(r, sign);
}
inline __m256 gelu_erf_avx2(__m256 x) {
  const __m256 h = _mm256_mul_ps(x, _mm256_set1_ps(0.5f));
  const __m256 e = erf_avx2(_mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f)));
  return _mm256_fmadd_ps(h, e, h);
}
inline __m256 gelu_tanh_avx2(__m256 x) {
  const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
  const __m256 inner = _mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f),
                                     _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), x3, x));
  const __m256 h = _mm256_mul_ps(x, _mm256_set1_ps(0.5f));
  return _mm256_fmadd_ps(h, tanh_avx2(inner), h);
}
#endif

// The vector form of a unary op where AVX2 is compiled in; elsewhere nothing (unary_loop then
// runs the scalar form on every element).
#ifdef LATHE_HAVE_VEC_EXP2
#define LATHE_VEC(f) f
#else
#define LATHE_VEC(f) 0
#endif

// y[j] = f(x[j]) with a vector form V (AVX2) and a scalar form S for the tail.
template <class V, class S>
void unary_loop(float* y, const float* x, int64_t n, V vf, S sf) {
  int64_t j = 0;
#ifdef LATHE_HAVE_VEC_EXP2
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(y + j, vf(_mm256_loadu_ps(x + j)));
#else
  (void)vf;
#endif
  for (; j < n; ++j) y[j] = sf(x[j]);
}

void run_instr(const PwInstr& in, float* y, float* const* reg, int64_t n) {
  const float* a = in.a >= 0 ? reg[in.a] : nullptr;
  const float* b = in.b >= 0 ? reg[in.b] : nullptr;
  const float c0 = static_cast<float>(in.c0), c1 = static_cast<float>(in.c1);
  switch (in.op) {
    case PwOp::input:
    case PwOp::constant:
      break;  // set up once per tile / per thread
    case PwOp::add:
      if (c0 == 1.0f)
        for (int64_t j = 0; j < n; ++j) y[j] = a[j] + b[j];
      else
        for (int64_t j = 0; j < n; ++j) y[j] = a[j] + c0 * b[j];
      break;
    case PwOp::sub:
      if (c0 == 1.0f)
        for (int64_t j = 0; j < n; ++j) y[j] = a[j] - b[j];
      else
        for (int64_t j = 0; j < n; ++j) y[j] = a[j] - c0 * b[j];
      break;
    case PwOp::mul:
      for (int64_t j = 0; j < n; ++j) y[j] = a[j] * b[j];
      break;
    case PwOp::div:
      for (int64_t j = 0; j < n; ++j) y[j] = a[j] / b[j];
      break;
    case PwOp::maximum:
      for (int64_t j = 0; j < n; ++j)
        y[j] = (a[j] != a[j] || b[j] != b[j]) ? std::numeric_limits<float>::quiet_NaN()
                                              : (a[j] > b[j] ? a[j] : b[j]);
      break;
    case PwOp::minimum:
      for (int64_t j = 0; j < n; ++j)
        y[j] = (a[j] != a[j] || b[j] != b[j]) ? std::numeric_limits<float>::quiet_NaN()
                                              : (a[j] < b[j] ? a[j] : b[j]);
      break;
    case PwOp::scale:
      for (int64_t j = 0; j < n; ++j) y[j] = a[j] * c0;
      break;
    case PwOp::neg:
      for (int64_t j = 0; j < n; ++j) y[j] = -a[j];
      break;
    case PwOp::relu:
      // As the eager kernel computes it: NaN stays NaN.
      for (int64_t j = 0; j < n; ++j) y[j] = a[j] > 0.0f || a[j] != a[j] ? a[j] : 0.0f;
      break;
    case PwOp::sigmoid:
      unary_loop(y, a, n, LATHE_VEC(sigmoid_avx2), sigmoid_scalar);
      break;
    case PwOp::tanh:
      unary_loop(y, a, n, LATHE_VEC(tanh_avx2), tanh_scalar);
      break;
    case PwOp::exp:
      unary_loop(y, a, n, LATHE_VEC(exp_avx2), exp_scalar);
      break;
    case PwOp::gelu_erf:
      unary_loop(y, a, n, LATHE_VEC(gelu_erf_avx2), gelu_erf_scalar);
      break;
    case PwOp::gelu_tanh:
      unary_loop(y, a, n, LATHE_VEC(gelu_tanh_avx2), gelu_tanh_scalar);
      break;
    case PwOp::clamp:
      // NaN stays NaN (the comparisons are false for it), as clamp does in eager.
      for (int64_t j = 0; j < n; ++j) {
        float v = a[j];
        v = v < c0 ? c0 : v;
        y[j] = v > c1 ? c1 : v;
      }
      break;
    case PwOp::hardswish:
      for (int64_t j = 0; j < n; ++j) {
        const float r = std::min(std::max(a[j] + 3.0f, 0.0f), 6.0f);
        y[j] = a[j] * r / 6.0f;
      }
      break;
    case PwOp::hardsigmoid:
      for (int64_t j = 0; j < n; ++j) y[j] = std::min(std::max(a[j] + 3.0f, 0.0f), 6.0f) / 6.0f;
      break;
  }
}

// Input i of the run: in place (out's layout, `linear`), one element (`scalar`), or a copy.
struct Source {
  const float* base = nullptr;
  bool scalar = false;
  Tensor keep;  // a copy in out's layout, when one was needed
};

// A constant as to_string prints it: a number, or inf / -inf / nan (a one-sided clamp's open
// bound), which operator>> does not read; a bad token sets the stream's fail bit.
double read_constant(std::istream& is) {
  std::string tok;
  if (!(is >> tok)) return 0;
  if (tok == "inf") return std::numeric_limits<double>::infinity();
  if (tok == "-inf") return -std::numeric_limits<double>::infinity();
  if (tok == "nan" || tok == "-nan") return std::numeric_limits<double>::quiet_NaN();
  char* end = nullptr;
  const double v = std::strtod(tok.c_str(), &end);
  if (end != tok.c_str() + tok.size()) is.setstate(std::ios::failbit);
  return v;
}

bool same_layout(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.strides() == b.strides();
}

}  // namespace

const char* pw_op_name(PwOp op) { return info(op).name; }
int pw_arity(PwOp op) { return info(op).arity; }

std::string PointwiseProgram::to_string() const {
  std::ostringstream os;
  os.precision(17);
  for (size_t k = 0; k < code.size(); ++k) {
    const PwInstr& in = code[k];
    const OpInfo& i = info(in.op);
    if (k) os << "; ";
    os << i.name;
    if (in.op == PwOp::input) os << " " << in.input;
    if (i.arity >= 1) os << " %" << in.a;
    if (i.arity >= 2) os << " %" << in.b;
    if (i.constants >= 1) os << " " << in.c0;
    if (i.constants >= 2) os << " " << in.c1;
  }
  return os.str();
}

PointwiseProgram PointwiseProgram::parse(const std::string& text, int num_inputs) {
  PointwiseProgram p;
  p.num_inputs = std::max(num_inputs, 0);
  std::stringstream all(text);
  std::string item;
  while (std::getline(all, item, ';')) {
    std::istringstream is(item);
    std::string name;
    is >> name;
    const OpInfo* found = nullptr;
    for (const OpInfo& i : kOps)
      if (name == i.name) found = &i;
    LATHE_CHECK(found, "[pointwise_fused] unknown instruction '", name, "' in \"", text, "\"");
    PwInstr in;
    in.op = found->op;
    const int k = static_cast<int>(p.code.size());
    auto reg = [&](int32_t& r) {
      std::string tok;
      is >> tok;
      LATHE_CHECK(tok.size() > 1 && tok[0] == '%', "[pointwise_fused] instruction ", k, " (", name,
                  ") expects a register like %0, got '", tok, "'");
      r = std::atoi(tok.c_str() + 1);
      LATHE_CHECK(r >= 0 && r < k, "[pointwise_fused] instruction ", k, " (", name,
                  ") reads register %", r, ", which is not defined before it");
    };
    if (in.op == PwOp::input) {
      is >> in.input;
      LATHE_CHECK(is && in.input >= 0 && (num_inputs < 0 || in.input < num_inputs),
                  "[pointwise_fused] instruction ", k, " reads input ", in.input, " of ",
                  num_inputs);
      p.num_inputs = std::max(p.num_inputs, in.input + 1);
    }
    if (found->arity >= 1) reg(in.a);
    if (found->arity >= 2) reg(in.b);
    if (found->constants >= 1) in.c0 = read_constant(is);
    if (found->constants >= 2) in.c1 = read_constant(is);
    LATHE_CHECK(!is.fail(), "[pointwise_fused] instruction ", k, " (", name, ") is incomplete: \"",
                item, "\"");
    p.code.push_back(in);
  }
  LATHE_CHECK(!p.code.empty(), "[pointwise_fused] the program is empty");
  return p;
}

void run_pointwise(const PointwiseProgram& program, std::span<const Tensor> inputs,
                   const Tensor& out) {
  LATHE_CHECK(static_cast<int>(inputs.size()) >= program.num_inputs,
              "[pointwise_fused] the program reads ", program.num_inputs, " inputs, got ",
              inputs.size());
  const int64_t total = out.numel();
  if (total == 0) return;  // (any strides: an empty tensor is not "dense")
  LATHE_CHECK(out.dtype() == DType::f32 && out.is_non_overlapping_and_dense(),
              "[pointwise_fused] the output must be dense f32, got ", out.shape_string());
  std::vector<Source> src(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    LATHE_CHECK(t.dtype() == DType::f32, "[pointwise_fused] input ", i, " must be f32, got ",
                t.shape_string());
    if (t.numel() == 1) {
      src[i].scalar = true;
      src[i].base = static_cast<const float*>(t.raw_data());
    } else if (same_layout(t, out)) {
      src[i].base = static_cast<const float*>(t.raw_data());
    } else {
      // Broadcast or another layout: one copy into out's layout, then read linearly.
      src[i].keep = empty_strided(out.sizes(), out.strides(), DType::f32);
      copy(src[i].keep, broadcast_to(t, out.sizes()));
      src[i].base = static_cast<const float*>(src[i].keep.raw_data());
    }
  }
  // Dense in some dimension order: element e of every linear source and of out is at offset e.
  float* po = static_cast<float*>(out.raw_data());
  const size_t regs = program.code.size();
  const int64_t tiles = (total + kTile - 1) / kTile;
  const int nt = total < 65536 ? 1 : static_cast<int>(std::min<int64_t>(num_threads(), tiles));
  const int64_t tiles_per_claim = chunk_size(tiles, nt);
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    std::vector<float> buf(regs * kTile);
    std::vector<float*> reg(regs);
    // Scalars and constants: a full tile each, filled once per thread.
    for (size_t k = 0; k < regs; ++k) {
      const PwInstr& in = program.code[k];
      float* b = buf.data() + k * kTile;
      if (in.op == PwOp::constant) std::fill(b, b + kTile, static_cast<float>(in.c0));
      if (in.op == PwOp::input && src[in.input].scalar)
        std::fill(b, b + kTile, *src[in.input].base);
    }
    // Tiles claimed dynamically, the caller working too (lathe/kernels/parallel_chunks.h).
#pragma omp for schedule(dynamic, tiles_per_claim)
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t start = t * kTile, n = std::min(kTile, total - start);
      for (size_t k = 0; k < regs; ++k) {
        const PwInstr& in = program.code[k];
        float* b = buf.data() + k * kTile;
        if (in.op == PwOp::input && !src[in.input].scalar) {
          reg[k] = const_cast<float*>(src[in.input].base) + start;  // read, never written
          if (k + 1 == regs) std::copy(reg[k], reg[k] + n, po + start);
          continue;
        }
        if (in.op == PwOp::input || in.op == PwOp::constant) {
          reg[k] = b;
          if (k + 1 == regs) std::copy(b, b + n, po + start);
          continue;
        }
        float* y = k + 1 == regs ? po + start : b;
        run_instr(in, y, reg.data(), n);
        reg[k] = y;
      }
    }
  }
}

}  // namespace lathe::kernels
