// 2-d convolution: oneDNN for f32 (channels-last activations, weights reordered once into the
// primitive's preferred layout and cached), a direct loop for f64 (reference accuracy).
#pragma once

#include <cstdint>
#include <string>

#include "lathe/core/tensor.h"
#include "lathe/kernels/post_ops.h"

namespace lathe::detail {

struct Conv2dParams {
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  int64_t dilation[2] = {1, 1};  // PyTorch convention (1 = dense)
  int64_t groups = 1;
  // oneDNN's Winograd algorithm (F(4x4,3x3) / F(2x2,3x3)) instead of the direct one: about 2x
  // fewer multiplies on 3x3 stride-1 convolutions, with a rounding error a few times the direct
  // one's. Only the blocked kernel (conv2d_forward_blocked, nChw16c) honours it, and only where
  // oneDNN has a Winograd kernel for the shape; elsewhere the direct algorithm runs.
  bool winograd = false;
  // Computes at bf16 precision (the cpu backend's precision pass, CompileOptions::precision): an
  // f32 input and weight are rounded to bf16 (the weight once, cached with its reordered layout)
  // and multiplied on oneDNN's bf16 kernels with f32 accumulation; bias, post-ops and the output
  // stay f32. Only where dnnl_bf16_native(); elsewhere it computes in f32. Never with Winograd
  // (oneDNN's Winograd kernels are f32 only): the direct algorithm runs.
  bool bf16 = false;
};

using ConvPostOps = PostOps;

// out = conv2d(x, w) + bias, then `post`. x [N,C,H,W] in any layout, w [O,C/groups,KH,KW], bias [O]
// or undefined; out is preallocated [N,O,OH,OW] (any dense layout; channels-last is the fast one).
// Shapes must already be validated.
void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p,
                    const Tensor& out, const ConvPostOps& post = {});

// The same on oneDNN's channel-blocked layouts (nChw8c / nChw16c), for f32 only: x is
// [N, C/B, H, W, B] and out [N, O/B, OH, OW, B], both contiguous, with the same block B (8 or 16;
// C and O multiples of it); w and bias as above. With post.sum, out holds the residual (in the same
// layout) on entry.
void conv2d_forward_blocked(const Tensor& x, const Tensor& w, const Tensor& bias,
                            const Conv2dParams& p, const Tensor& out, const ConvPostOps& post = {});

// The channel block oneDNN's f32 convolution prefers for its activations on this machine (asked
// once per process from a primitive created with format_tag::any): 16 where it runs AVX-512
// kernels, 8 on AVX2, 0 when it wants no blocked layout.
int dnnl_preferred_conv_block();

// What a blocked layout is worth on this machine, measured once per process (about 20-40 ms): a
// 3x3 64 -> 64 convolution at 28x28, batch 1, with relu, timed on channels-last activations and
// on the preferred block (best of several alternating runs each). On AVX2 machines nChw8c has been
// the faster one; on AVX-512 ones (Zen 4) channels-last beat nChw16c.
struct ConvLayoutChoice {
  int preferred_block = 0;     // dnnl_preferred_conv_block()
  double channels_last_s = 0;  // best time of one convolution, channels-last
  double blocked_s = 0;        // the same on the preferred block (0 if none)
  int block = 0;               // the block to use: preferred_block if measurably faster, else 0
};
const ConvLayoutChoice& dnnl_measured_conv_layout();

// Whether oneDNN's Winograd convolution pays on this machine, measured once per process (about
// 20-40 ms): a 3x3 128 -> 128 convolution at 28x28, batch 1, with relu, on nChw16c, direct vs
// Winograd (best of alternating runs). oneDNN 2.6 has f32 Winograd kernels only for AVX-512.
struct WinogradChoice {
  bool available = false;  // oneDNN created a Winograd primitive for the probe
  double direct_s = 0;     // best time of the probe, direct algorithm
  double winograd_s = 0;   // the same with Winograd
  bool use = false;        // available and at least 10% faster
};
const WinogradChoice& dnnl_measured_winograd();

// One convolution's shape, as a layout probe sees it (f32, no post-ops).
struct ConvProbeShape {
  int64_t n = 1, c = 1, h = 1, w = 1;  // input [N, C, H, W]
  int64_t o = 1, kh = 1, kw = 1;       // weight [O, C/groups, KH, KW]
  Conv2dParams p;
};

// The wall time of that convolution on channels-last activations (block 0) or on nChw8c /
// nChw16c (block 8 / 16), in seconds, on probe data: after a warm-up (the primitive made, the
// weight reordered), every layout the shape allows is timed in the same 2-5 rounds, one after
// the other, and the best of each is kept (probes of one layout taken at another time differ by
// more than the layouts do on this kind of shared machine). Measured once per shape, block and thread count in the
// process (cached; thread safe); +inf where the block does not divide the channels (or the
// group's channels), or oneDNN has no kernel. plan_layouts asks it for the memory-bound
// convolutions of a graph (depthwise, few channels) whose speed depends on the layout.
double dnnl_measured_conv_s(const ConvProbeShape& s, int block);

// The measurement cache's key (lathe/kernels/measure_cache.h) of that convolution's probe: one
// entry holds its three layouts' times (+inf where a layout cannot run it).
std::string dnnl_conv_probe_key(const ConvProbeShape& s);

// Forgets the probe results this process measured or loaded (not the once-per-process layout
// and Winograd choices), so the next probe asks the measurement cache again. For tests.
void dnnl_forget_probes();

// The wall time of the reorder of an [N, C, H, W] activation between channels-last and
// nChw<block>c, in seconds (to_blocked; from_blocked is as fast), measured and cached as above.
double dnnl_measured_reorder_s(int64_t n, int64_t c, int64_t h, int64_t w, int block);

// A convolution the blocked Winograd kernel can run: f32 3x3, stride 1, dilation 1, one group,
// channels and output channels multiples of 16.
bool winograd_eligible(int64_t channels, int64_t out_channels, int64_t kh, int64_t kw,
                       const Conv2dParams& p);

}  // namespace lathe::detail
