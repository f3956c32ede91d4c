// The fuzzer's program model: generation over symbolic dim names (so a program stays valid when
// the call sizes change), the interpreter, the printer and the step-dropping shrinker.
#include "tests/trace/compile_fuzz.h"

#include <cstdlib>
#include <limits>
#include <sstream>

#include "lathe/core/random.h"
#include "lathe/ops/ops.h"

namespace lathe::fuzz {

const char* feature_name(Feature f) {
  switch (f) {
    case Feature::kParamAssign:
      return "param_assign";
    case Feature::kLambdaModule:
      return "lambda_module";
    case Feature::kFactoryOutput:
      return "factory_output";
    case Feature::kNegativeIndex:
      return "negative_index";
    case Feature::kSymbolicIndex:
      return "symbolic_index";
    case Feature::kReshapeNonContiguous:
      return "reshape_non_contiguous";
    case Feature::kDynamicLastDim:
      return "dynamic_last_dim";
    case Feature::kZeroSizeReshape:
      return "zero_size_reshape";
    case Feature::kSoftmaxLayout:
      return "softmax_layout";
    case Feature::kDynamicTrainBn:
      return "dynamic_train_bn";
  }
  return "?";
}

// Features whose bugs are fixed run by default; a feature hitting a known-open bug goes in
// `open` and runs only when LATHE_FUZZ_ENABLE names it. reshape_non_contiguous runs since issue
// 11 made reshape an op that decides view-or-copy from the real strides on every run.
std::set<Feature> enabled_features() {
  std::set<Feature> on{Feature::kParamAssign,     Feature::kLambdaModule,
                       Feature::kFactoryOutput,   Feature::kNegativeIndex,
                       Feature::kSymbolicIndex,   Feature::kDynamicLastDim,
                       Feature::kZeroSizeReshape, Feature::kDynamicTrainBn,
                       Feature::kSoftmaxLayout,   Feature::kReshapeNonContiguous};
  const std::vector<Feature> open;
  const char* env = std::getenv("LATHE_FUZZ_ENABLE");
  if (env == nullptr) return on;
  const std::string list = std::string(",") + env + ",";
  for (Feature f : open)
    if (list.find(",all,") != std::string::npos ||
        list.find(std::string(",") + feature_name(f) + ",") != std::string::npos)
      on.insert(f);
  return on;
}

namespace {

constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();

// What the generator knows of a value: a name per dim ("B", "S", "D", "1", "B*S", "s3"), equal
// names meaning equal sizes on every call.
struct ValueInfo {
  std::vector<std::string> dims;
  int flattened_from = -1;  // the value this one is a reshape({-1, D}) of
};

template <class T>
const T& pick(std::mt19937_64& rng, const std::vector<T>& v) {
  return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
}

int64_t uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

// prefix + n (spelled out: GCC 12 warns falsely on "literal" + std::string under -O3).
std::string tag(const char* prefix, int64_t n) {
  std::ostringstream os;
  os << prefix << n;
  return os.str();
}

bool is_suffix(const std::vector<std::string>& small, const std::vector<std::string>& big) {
  if (small.size() > big.size()) return false;
  return std::equal(small.rbegin(), small.rend(), big.rbegin());
}

}  // namespace

Program generate_program(std::mt19937_64& rng, int num_steps, const std::set<Feature>& features) {
  Program p;
  p.d = pick<int64_t>(rng, {3, 4});
  p.arg1_broadcast = uniform(rng, 0, 3) == 0;
  std::vector<ValueInfo> vals = {{{"B", "S", "D"}}, {}};
  vals[1].dims = p.arg1_broadcast ? std::vector<std::string>{"D"} : vals[0].dims;
  int fresh = 0;
  const bool negative = features.count(Feature::kNegativeIndex) > 0;
  const bool symbolic = features.count(Feature::kSymbolicIndex) > 0;
  // The index choices: 0 always; 1 and step 2 with symbolic_index; negative ones with
  // negative_index.
  std::vector<int64_t> select_index = {0}, slice_start = {0}, slice_end = {kEnd, 3},
                       slice_step = {1};
  if (symbolic) select_index.push_back(1), slice_start.push_back(1), slice_step.push_back(2);
  if (negative) {
    select_index.insert(select_index.end(), {-1, -2});
    slice_start.push_back(-2);
    slice_end.push_back(-1);
  }
  while (static_cast<int>(p.steps.size()) < num_steps) {
    Step s;
    s.a = static_cast<int>(uniform(rng, 0, static_cast<int64_t>(vals.size()) - 1));
    const ValueInfo& va = vals[s.a];
    ValueInfo out = va;
    const int64_t r = static_cast<int64_t>(va.dims.size());
    const bool last_is_d = r >= 1 && va.dims.back() == "D";
    switch (uniform(rng, 0, 17)) {
      case 0:
      case 1:
        s.kind = OpKind::kUnary;
        s.name = pick<std::string>(rng, {"relu", "neg", "tanh", "sigmoid", "abs", "gelu"});
        break;
      case 2:
        s.kind = OpKind::kScalar;
        s.name = pick<std::string>(rng, {"mul", "add"});
        s.s = pick<double>(rng, {-1.5, 0.5, 2.0});
        break;
      case 3:
      case 4: {
        std::vector<int> partners;
        for (size_t j = 0; j < vals.size(); ++j)
          if (is_suffix(vals[j].dims, va.dims)) partners.push_back(static_cast<int>(j));
        s.kind = OpKind::kBinary;
        s.b = pick(rng, partners);
        s.name = pick<std::string>(rng, {"add", "mul", "sub", "maximum"});
        break;
      }
      case 5:
        if (r < 2) continue;
        s.kind = OpKind::kTranspose;
        s.i0 = uniform(rng, 0, r - 1);
        s.i1 = uniform(rng, -r, -1);
        std::swap(out.dims[s.i0], out.dims[r + s.i1]);
        break;
      case 6:
        if (r >= 4) continue;
        s.kind = OpKind::kUnsqueeze;
        s.i0 = uniform(rng, 0, r);
        out.dims.insert(out.dims.begin() + s.i0, "1");
        break;
      case 7:
      case 8:
        if (r < 1) continue;
        s.kind = OpKind::kSelect;
        s.i0 = uniform(rng, 0, r - 1);
        s.i1 = pick(rng, select_index);
        out.dims.erase(out.dims.begin() + s.i0);
        break;
      case 9:
        if (r < 1) continue;
        s.kind = OpKind::kSlice;
        s.i0 = uniform(rng, 0, r - 1);
        s.i1 = pick(rng, slice_start);
        s.i2 = pick(rng, slice_end);
        s.s = static_cast<double>(pick(rng, slice_step));
        out.dims[s.i0] = tag("s", fresh++);
        break;
      case 10:
        if (r < 2 || !last_is_d || va.dims[0] == "1") continue;
        s.kind = OpKind::kFlatten;
        s.i0 = features.count(Feature::kReshapeNonContiguous) ? 0 : 1;
        out.dims = {tag("flat", fresh++), "D"};
        out.flattened_from = s.a;
        break;
      case 11: {
        if (va.flattened_from < 0) continue;
        s.kind = OpKind::kUnflatten;
        s.b = va.flattened_from;
        out = vals[s.b];
        break;
      }
      case 12:
        if (r < 1) continue;
        s.kind = OpKind::kReduce;
        s.name = pick<std::string>(rng, {"sum", "mean", "amax"});
        s.i0 = uniform(rng, -r, r - 1);
        s.i1 = uniform(rng, 0, 1);
        if (s.i1)
          out.dims[(s.i0 + r) % r] = "1";
        else
          out.dims.erase(out.dims.begin() + (s.i0 + r) % r);
        break;
      case 13:
        if (r < 1) continue;
        s.kind = OpKind::kSoftmax;
        s.i0 = features.count(Feature::kSoftmaxLayout) ? uniform(rng, -r, r - 1) : -1;
        break;
      case 14:
        if (!last_is_d) continue;
        s.kind = pick<OpKind>(rng, {OpKind::kMatmulParam, OpKind::kLinear});
        break;
      case 15:
        if (r != 3) continue;
        s.kind = OpKind::kConvBlock;
        break;
      case 16: {
        // In place: into a value (possibly a view of an argument), from a broadcastable one.
        s.kind =
            pick<OpKind>(rng, {OpKind::kAddInplace, OpKind::kMulInplace, OpKind::kReluInplace});
        if (s.kind == OpKind::kAddInplace) {
          std::vector<int> partners;
          for (size_t j = 0; j < vals.size(); ++j)
            if (is_suffix(vals[j].dims, va.dims) && static_cast<int>(j) != s.a)
              partners.push_back(static_cast<int>(j));
          if (partners.empty()) continue;
          s.b = pick(rng, partners);
        }
        s.s = pick<double>(rng, {0.5, -2.0});
        break;
      }
      case 17:
        if (!features.count(Feature::kFactoryOutput)) continue;
        s.kind = OpKind::kFactory;
        s.a = -1;
        s.s = pick<double>(rng, {1.5, -0.25});
        out = ValueInfo{{"D"}};
        break;
    }
    p.steps.push_back(s);
    vals.push_back(out);
  }
  // Return the last value and up to two others (factory results only when enabled).
  const int n = static_cast<int>(vals.size());
  p.outputs.push_back(n - 1);
  for (int k = 0; k < 2; ++k) {
    int v = static_cast<int>(uniform(rng, 2, n - 1));
    bool dup = false;
    for (int o : p.outputs) dup |= o == v;
    if (!dup) p.outputs.push_back(v);
  }
  // A third of the programs get a branch on data (a graph break) inserted at a random step, drawn
  // from a copy of the generator so that the rest of the program and its calls stay as before.
  std::mt19937_64 side = rng;
  side.discard(11);
  if (uniform(side, 0, 2) == 0) {
    const size_t k = static_cast<size_t>(uniform(side, 0, static_cast<int64_t>(p.steps.size())));
    Step branch;
    branch.kind = OpKind::kBranch;
    branch.a = static_cast<int>(uniform(side, 0, static_cast<int64_t>(k) + 1));
    branch.s = pick<double>(side, {-0.5, 3.0});
    p = insert_step(p, k, branch);
  }
  return p;
}

Program insert_step(const Program& p, size_t k, const Step& step) {
  Program q = p;
  q.steps.clear();
  const int at = static_cast<int>(k) + 2;  // the new value's index; later ones move up by one
  auto shift = [at](int v) { return v >= at ? v + 1 : v; };
  for (size_t i = 0; i <= p.steps.size(); ++i) {
    if (i == k) q.steps.push_back(step);
    if (i == p.steps.size()) break;
    Step s = p.steps[i];
    if (s.a >= 0) s.a = shift(s.a);
    if (s.b >= 0) s.b = shift(s.b);
    q.steps.push_back(s);
  }
  q.outputs.clear();
  for (int o : p.outputs) q.outputs.push_back(shift(o));
  q.outputs.push_back(at);
  return q;
}

Program drop_step(const Program& p, size_t k) {
  Program q = p;
  q.steps.clear();
  q.outputs.clear();
  // new_index[v]: the value's index after the drop, or -1 when it is gone.
  std::vector<int> new_index = {0, 1};
  for (size_t i = 0; i < p.steps.size(); ++i) {
    Step s = p.steps[i];
    auto remap = [&](int& v) {
      if (v < 0) return true;
      v = new_index[v];
      return v >= 0;
    };
    const bool keep = i != k && remap(s.a) && remap(s.b);
    if (keep) q.steps.push_back(s);
    new_index.push_back(keep ? static_cast<int>(q.steps.size()) + 1 : -1);
  }
  for (int o : p.outputs)
    if (new_index[o] >= 2) q.outputs.push_back(new_index[o]);
  if (q.outputs.empty()) q.outputs.push_back(static_cast<int>(q.steps.size()) + 1);
  return q;
}

std::string Program::to_string() const {
  std::ostringstream os;
  os << "  // arg0: f32[B,S," << d << "], arg1: " << (arg1_broadcast ? "f32[" : "f32[B,S,") << d
     << "]; module: w f32[" << d << "," << d << "], lin Linear(" << d << "," << d
     << "), conv Conv2d(1,2,3,padding=1), bn BatchNorm2d(2)\n";
  auto v = [](int i) { return tag(i < 2 ? "arg" : "v", i); };
  for (size_t k = 0; k < steps.size(); ++k) {
    const Step& s = steps[k];
    os << "  Tensor " << v(static_cast<int>(k) + 2) << " = ";
    switch (s.kind) {
      case OpKind::kUnary:
        os << s.name << "(" << v(s.a) << ")";
        break;
      case OpKind::kScalar:
        os << s.name << "(" << v(s.a) << ", " << s.s << ")";
        break;
      case OpKind::kBinary:
        os << s.name << "(" << v(s.a) << ", " << v(s.b) << ")";
        break;
      case OpKind::kTranspose:
        os << v(s.a) << ".transpose(" << s.i0 << ", " << s.i1 << ")";
        break;
      case OpKind::kUnsqueeze:
        os << v(s.a) << ".unsqueeze(" << s.i0 << ")";
        break;
      case OpKind::kSelect:
        os << v(s.a) << ".select(" << s.i0 << ", " << s.i1 << ")";
        break;
      case OpKind::kSlice:
        os << v(s.a) << ".slice(" << s.i0 << ", " << s.i1 << ", "
           << (s.i2 == kEnd ? std::string("INT64_MAX") : std::to_string(s.i2)) << ", " << s.s
           << ")";
        break;
      case OpKind::kFlatten:
        os << v(s.a) << (s.i0 ? ".contiguous()" : "") << ".reshape({-1, " << d << "})";
        break;
      case OpKind::kUnflatten:
        os << v(s.a) << ".reshape(" << v(s.b) << ".sizes())";
        break;
      case OpKind::kReduce:
        os << s.name << "(" << v(s.a) << ", {" << s.i0 << "}, " << (s.i1 ? "true" : "false") << ")";
        break;
      case OpKind::kSoftmax:
        os << "softmax(" << v(s.a) << ", " << s.i0 << ")";
        break;
      case OpKind::kMatmulParam:
        os << "matmul(" << v(s.a) << ", m.param(\"w\"))";
        break;
      case OpKind::kLinear:
        os << "m.lin(" << v(s.a) << ")";
        break;
      case OpKind::kConvBlock:
        os << "mean(m.bn(m.conv(" << v(s.a) << ".unsqueeze(1))), {1})";
        break;
      case OpKind::kAddInplace:
        os << "add_(" << v(s.a) << ", " << v(s.b) << ")";
        break;
      case OpKind::kMulInplace:
        os << "mul_(" << v(s.a) << ", " << s.s << ")";
        break;
      case OpKind::kReluInplace:
        os << "relu_(" << v(s.a) << ")";
        break;
      case OpKind::kFactory:
        os << "full({" << d << "}, " << s.s << ")  /* on arg0's device */";
        break;
      case OpKind::kBranch:
        os << "sum(" << v(s.a) << ").item() > 0 ? relu(" << v(s.a) << ") : mul(" << v(s.a) << ", "
           << s.s << ")";
        break;
    }
    os << ";\n";
  }
  os << "  return {";
  for (size_t i = 0; i < outputs.size(); ++i) os << (i ? ", " : "") << v(outputs[i]);
  os << "};\n";
  return os.str();
}

FuzzModule::FuzzModule(std::shared_ptr<const Program> program, uint64_t seed)
    : program_(std::move(program)) {
  const int64_t d = program_->d;
  Generator g(seed);
  register_parameter("w", mul(randn({d, d}, DType::f32, &g), 0.5));
  register_module("lin", nn::make<nn::Linear>(d, d));
  register_module("conv", nn::make<nn::Conv2d>(1, 2, 3, 1, 1));
  register_module("bn", nn::make<nn::BatchNorm2d>(2));
  // Every world builds the same values, whatever the global generator did before.
  for (auto& [name, t] : named_parameters())
    t.copy_(mul(randn(to_shape(t.shape()), DType::f32, &g), 0.5));
}

std::vector<Tensor> FuzzModule::forward_all(const std::vector<Tensor>& inputs) {
  return run_program(*program_, *this, inputs);
}

std::vector<Tensor> run_program(const Program& p, nn::Module& m, const std::vector<Tensor>& in) {
  std::vector<Tensor> v = in;
  for (const Step& s : p.steps) {
    const Tensor a = s.a >= 0 ? v[s.a] : Tensor();
    Tensor r;
    switch (s.kind) {
      case OpKind::kUnary:
        if (s.name == "relu")
          r = relu(a);
        else if (s.name == "neg")
          r = neg(a);
        else if (s.name == "tanh")
          r = tanh(a);
        else if (s.name == "sigmoid")
          r = sigmoid(a);
        else if (s.name == "abs")
          r = abs(a);
        else
          r = gelu(a);
        break;
      case OpKind::kScalar:
        r = s.name == "mul" ? mul(a, s.s) : add(a, s.s);
        break;
      case OpKind::kBinary:
        if (s.name == "add")
          r = add(a, v[s.b]);
        else if (s.name == "mul")
          r = mul(a, v[s.b]);
        else if (s.name == "sub")
          r = sub(a, v[s.b]);
        else
          r = maximum(a, v[s.b]);
        break;
      case OpKind::kTranspose:
        r = a.transpose(s.i0, s.i1);
        break;
      case OpKind::kUnsqueeze:
        r = a.unsqueeze(s.i0);
        break;
      case OpKind::kSelect:
        r = a.select(s.i0, s.i1);
        break;
      case OpKind::kSlice:
        r = a.slice(s.i0, s.i1, s.i2, static_cast<int64_t>(s.s));
        break;
      case OpKind::kFlatten:
        r = (s.i0 ? a.contiguous() : a).reshape({-1, p.d});
        break;
      case OpKind::kUnflatten:
        r = a.reshape(v[s.b].sizes());
        break;
      case OpKind::kReduce:
        if (s.name == "sum")
          r = sum(a, {s.i0}, s.i1 != 0);
        else if (s.name == "mean")
          r = mean(a, {s.i0}, s.i1 != 0);
        else
          r = amax(a, {s.i0}, s.i1 != 0);
        break;
      case OpKind::kSoftmax:
        r = softmax(a, s.i0);
        break;
      case OpKind::kMatmulParam:
        r = matmul(a, m.param("w"));
        break;
      case OpKind::kLinear:
        r = m.child("lin")->forward(a);
        break;
      case OpKind::kConvBlock:
        r = mean(m.child("bn")->forward(m.child("conv")->forward(a.unsqueeze(1))), {1});
        break;
      case OpKind::kAddInplace: {
        Tensor t = a;
        r = add_(t, v[s.b]);
        break;
      }
      case OpKind::kMulInplace: {
        Tensor t = a;
        r = mul_(t, s.s);
        break;
      }
      case OpKind::kReluInplace: {
        Tensor t = a;
        r = relu_(t);
        break;
      }
      case OpKind::kFactory:
        r = full({p.d}, s.s);
        // On the arguments' device (the lazy device in the fuzzer's lazy variant).
        if (in[0].device() != Device::cpu()) r = r.to(in[0].device());
        break;
      case OpKind::kBranch:
        r = sum(a).item() > 0 ? relu(a) : mul(a, s.s);
        break;
    }
    v.push_back(r);
  }
  std::vector<Tensor> out;
  for (int o : p.outputs) out.push_back(v[o]);
  return out;
}

}  // namespace lathe::fuzz
