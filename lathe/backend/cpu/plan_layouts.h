// Pass plan_layouts: chains of convolutions keep their activations in one of oneDNN's
// channel-blocked layouts (nChw16c, what its AVX-512 kernels are written for, or nChw8c, the AVX2
// one) instead of channels-last, with reorders only where a region starts or ends:
//
//   conv2d_fused (no batch norm left: folded at compile time)  ->  conv2d_blocked
//   a blocked value read outside the region                      ->  from_blocked after it
//   a channels-last value read inside the region                 ->  to_blocked(block) before it
//
// The block B and which convolutions take it are chosen per region by measurement on the
// running machine (`choose_block`, below): the memory-bound convolutions of the graph are timed
// on their real shapes in each layout, the reorders too, and a minimum cut labels each
// convolution so that the sum is least; a graph without memory-bound convolutions takes the
// machine's block (`plan_layouts_block`: the block oneDNN's convolution picks for itself when a
// probe convolution runs measurably faster on it than on channels-last, else none).
// LATHE_CPU_BLOCK=0|8|16 overrides both. Measured: nChw8c beat channels-last on an AVX2 Zen 3;
// on an AVX-512 Zen 4 channels-last beat both on resnet-like graphs, while nChw8c won on
// mobilenet_v2 at batch 8 (docs/benchmarks.md), so the choice matters and is not one per machine.
//
// Winograd: where oneDNN's Winograd convolution is measurably faster on the running machine
// (`plan_layouts_winograd`, an AVX-512 kernel: about 2x on 3x3 stride-1 convolutions), every
// convolution it can run (f32 3x3, stride 1, no dilation, one group, channels multiples of 16)
// is converted with `algorithm = "winograd"`, the block becomes 16 (its only layout), and such a
// convolution is converted even when alone. LATHE_CPU_WINOGRAD=0|1 overrides the measurement.
// Its rounding error is a few times the direct algorithm's (docs/benchmarks.md gives the
// accuracy-mode figures).
//
// A max pooling reading a candidate convolution's output joins the region as
// max_pool2d_blocked (oneDNN pools nChw16c / nChw8c directly), so squeezenet's pools between
// Fire modules need no reorders.
//
// A network's first convolution (at most 4 input channels: no block) reads its nchw input as it
// is and writes the blocked layout itself (conv2d_blocked with a plain input and attribute
// "block") when its readers are converted, so a region can start there with no reorder.
//
// Without per-region labels (LATHE_CPU_BLOCK set, or LATHE_CPU_LAYOUT_REGIONS=0), a value stays
// blocked when it is made by a candidate convolution, is no graph output, and every
// user is a candidate convolution (reading it as its input or its residual). Candidates: f32,
// static sizes, no batch-norm inputs, channels and output channels multiples of B, and either
// dense, depthwise, or with a multiple of B channels per group (other grouped convolutions have
// no blocked kernel). A candidate is converted only when it touches a blocked value, so a lone
// convolution pays no reorders. Off with LATHE_DISABLE_PASSES=plan_layouts.
#pragma once

#include <memory>
#include <string>
#include <unordered_set>

#include "lathe/backend/cpu/cpu_options.h"
#include "lathe/ir/graph.h"

namespace lathe::backend::cpu {

struct PlanLayoutsStats {
  int block = 0;           // the channel block used (0: none, the graph is unchanged)
  int blocked_convs = 0;   // convolutions converted
  int to_blocked = 0;      // reorders into the blocked layout
  int from_blocked = 0;    // reorders out of it
  int blocked_pools = 0;   // max poolings converted (max_pool2d_blocked)
  int winograd_convs = 0;  // of the converted convolutions, those on the Winograd algorithm
  int blocked_stems = 0;   // of them, first convolutions reading a plain input (see is_stem)
};

// Whether the pass uses Winograd by default: LATHE_CPU_WINOGRAD when set (0 or 1; 1 still needs
// a machine with oneDNN's Winograd kernel), else the measured choice for this machine.
bool plan_layouts_winograd();
bool plan_layouts_winograd(const CpuBackendOptions& o);

// The block the pass uses by default: LATHE_CPU_BLOCK when set (8 or 16, or 0 for none), else
// the measured choice for this machine (0 when channels-last is as fast).
int plan_layouts_block();

// The block for one graph, by measurement on the running machine (what the cpu backend uses
// when LATHE_CPU_BLOCK is not set):
// - a graph with a Winograd convolution takes 16 (Winograd's layout; what plan_layouts does);
// - with `constant_weights` given, a graph that writes (a training step's batch norm statistics)
//   with a convolution whose weight is not one of them takes 0: eager's layout, so that its
//   convolutions round as eager's do;
// - else the memory-bound convolutions decide (fewer than kMemoryBoundFlopsPerByte flops per byte
//   of activation read and written: depthwise, and 1x1 with few channels, whose speed depends on
//   the layout, unlike the compute-bound ones that run at the machine's peak on every layout):
//   each is timed on its real shape on channels-last, nChw8c and nChw16c in the same rounds
//   (lathe::detail::dnnl_measured_conv_s, cached per shape); for each block a minimum cut
//   (MinCut) labels every candidate convolution channels-last or blocked so that the measured
//   times plus the reorders the labels need (one per value that crosses, measured too) are
//   least: a region where the blocked kernels win more than its edges cost goes blocked, the
//   rest stays channels-last. The block whose labelling is cheapest wins, when at least 5%
//   cheaper than all channels-last; `convert` holds its blocked convolutions;
// - a graph without memory-bound convolutions takes the machine's block (plan_layouts_block).
// Measured on mobilenet_v2 at batch 8 (Zen 4): nChw8c runs the depthwise convolutions at 56x56
// and above about 2x and the 1x1 ones 1.3-1.8x faster than channels-last, equal from 14x14 down.
inline constexpr double kMemoryBoundFlopsPerByte = 40;
struct BlockChoice {
  int block = 0;
  bool winograd = false;         // forced to 16 by a Winograd convolution
  bool training = false;         // a training step (writes, weights no constants): channels-last
  int probed_convs = 0;          // memory-bound convolutions timed
  double cost_s[3] = {0, 0, 0};  // their time plus reorders: channels-last, 8, 16 (per region)
  // per_region: the block's plan converts exactly the convolutions in `convert` (nodes of the
  // graph given; pass it to plan_layouts); else plan_layouts' own rule applies.
  bool per_region = false;
  std::unordered_set<const ir::Node*> convert;
  // One line per memory-bound convolution: its output, the probes' times in each layout and
  // whether the chosen plan converts it (LATHE_LOGS=passes prints it).
  std::string table;
};
BlockChoice choose_block(const ir::Graph& g, bool winograd = plan_layouts_winograd(),
                         const std::unordered_set<const ir::Value*>* constant_weights = nullptr);

// choose_block's per-region labelling for one block (8 or 16): the convolutions of g to convert.
std::unordered_set<const ir::Node*> region_labels(const ir::Graph& g, int block);

// `block` 0 and no Winograd convolution leave the graph as it is.
// `constant_weights`, when given, limits Winograd to convolutions whose weight is one of these
// values (frozen constants): its weight transform is cached per weight, so a weight that changes
// every call (training) would pay it every call, and training keeps the direct algorithm's
// rounding, which eager has. Without it every eligible convolution qualifies.
// `convert`, when given (choose_block's per-region labels), is the set of convolutions to put on
// the blocked layout, instead of the rule "touches a blocked value"; Winograd's still convert,
// and max poolings join after a converted convolution as before.
std::unique_ptr<ir::Graph> plan_layouts(
    const ir::Graph& g, PlanLayoutsStats* stats = nullptr, int block = plan_layouts_block(),
    bool winograd = plan_layouts_winograd(),
    const std::unordered_set<const ir::Value*>* constant_weights = nullptr,
    const std::unordered_set<const ir::Node*>* convert = nullptr);

}  // namespace lathe::backend::cpu
