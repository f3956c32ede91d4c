// The differential fuzzer of lathe::compile: random programs (compile_fuzz.h) and random call
// sequences (sizes changing, zero and one sizes, transposed and sliced arguments, an argument
// passed twice, parameters updated in place and replaced, a child swapped, train/eval), each call
// run eagerly and through compiled functions (default options, kStatic, kDynamic); outputs
// (values, shapes, strides), arguments written in place and the module's parameters and buffers
// must match eager after every call, and a call must fail compiled exactly when it fails eagerly.
// The same programs and calls also run on the lazy device ("trace every time": the module and the
// arguments moved there, one sync per call), with arguments of every layout (transposed, sliced)
// even where the compiled variants keep them contiguous (issue 11), against eager.
//
//   LATHE_FUZZ_SEED=<n>     base seed (case i uses seed n + i; default 20261203)
//   LATHE_FUZZ_CASES=<n>    number of cases (default 600: 20-40 s on 2 shared cores)
//   LATHE_FUZZ_SECONDS=<n>  stop starting new cases after n seconds (default 90; 0: no limit)
//   LATHE_FUZZ_ENABLE=a,b   turn on generator features that hit known-open bugs (or "all")
//
// A failure prints the seed, what differed, and the program and calls shrunk by dropping steps
// and calls. See docs/trace.md, "The differential fuzzer".
#include "tests/trace/compile_fuzz.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <sstream>

#include "lathe/core/random.h"
#include "lathe/lazy/lazy.h"
#include "lathe/ops/ops.h"
#include "lathe/trace/compile.h"

namespace lathe::fuzz {
namespace {

enum class Event { kNone, kTrain, kEval, kParamInPlace, kSetParameter, kSwapChild, kParamAssign };

const char* event_string(Event e) {
  switch (e) {
    case Event::kNone:
      return "";
    case Event::kTrain:
      return "m.train(); ";
    case Event::kEval:
      return "m.eval(); ";
    case Event::kParamInPlace:
      return "m.param(\"w\").mul_(0.9); m.lin.weight.add_(0.1); ";
    case Event::kSetParameter:
      return "m.lin.set_parameter(\"weight\", m.lin.weight * 0.8); ";
    case Event::kSwapChild:
      return "m.set_child(\"lin\", new Linear with other values); ";
    case Event::kParamAssign:
      return "m.param(\"w\") = m.param(\"w\") * 1.1;  /* item 1 */ ";
  }
  return "";
}

enum class Layout { kContiguous, kTransposed, kSliced };

std::string layout_name(Layout l) {
  return l == Layout::kTransposed ? "transposed storage"
         : l == Layout::kSliced   ? "sliced with step 2"
                                  : "contiguous";
}

struct Call {
  int64_t b = 2, s = 3;
  Layout layout = Layout::kContiguous;
  Layout lazy_layout = Layout::kContiguous;  // arg0's layout on the lazy device (unrestricted)
  bool alias = false;                        // arg1 is arg0 (when both are [B,S,D])
  Event event = Event::kNone;
  uint64_t seed = 0;
  std::string to_string(const Program& p) const {
    std::ostringstream os;
    os << event_string(event) << "arg0 = f32[" << b << "," << s << "," << p.d << "]"
       << (layout == Layout::kTransposed ? " (transposed storage)"
           : layout == Layout::kSliced   ? " (sliced with step 2)"
                                         : "")
       << (lazy_layout != layout ? " (on the lazy device: " + layout_name(lazy_layout) + ")" : "")
       << ", " << (alias ? "arg1 is arg0" : "arg1 separate");
    return os.str();
  }
};

// The compiled variants every call runs through, beside eager.
enum class Variant { kDefault, kStatic, kDynamic, kLambda, kLazy };
const char* variant_name(Variant v) {
  switch (v) {
    case Variant::kDefault:
      return "compile(module)";
    case Variant::kStatic:
      return "compile(module, kStatic)";
    case Variant::kDynamic:
      return "compile(module, kDynamic)";
    case Variant::kLambda:
      return "compile([m](x) { return m->forward_all(x); })";
    case Variant::kLazy:
      return "lazy device: m.to(Device::lazy()), arguments moved there, sync()";
  }
  return "?";
}

// The argument's storage is made on the CPU and moved to `device` before the view is taken, so
// an argument on the lazy device has the layout of the CPU one (a view of device data).
Tensor random_arg(const std::vector<int64_t>& shape, Layout layout, uint64_t seed,
                  Device device = Device::cpu()) {
  Generator g(seed);
  switch (layout) {
    case Layout::kContiguous:
      return randn(to_shape(shape), DType::f32, &g).to(device);
    case Layout::kTransposed: {
      std::vector<int64_t> t = shape;
      std::swap(t[t.size() - 1], t[t.size() - 2]);
      return randn(to_shape(t), DType::f32, &g).to(device).transpose(-1, -2);
    }
    case Layout::kSliced: {
      std::vector<int64_t> t = shape;
      t.back() *= 2;
      return randn(to_shape(t), DType::f32, &g).to(device).slice(-1, 0, t.back(), 2);
    }
  }
  return {};
}

std::vector<Tensor> make_args(const Program& p, const Call& c, Device device = Device::cpu()) {
  Tensor a0 = random_arg({c.b, c.s, p.d}, c.layout, c.seed, device);
  if (p.arg1_broadcast) return {a0, random_arg({p.d}, Layout::kContiguous, c.seed + 1, device)};
  if (c.alias) return {a0, a0};
  return {a0, random_arg({c.b, c.s, p.d}, Layout::kContiguous, c.seed + 1, device)};
}

void apply_event(nn::Module& m, const Call& c, int64_t d) {
  switch (c.event) {
    case Event::kNone:
      break;
    case Event::kTrain:
      m.train();
      break;
    case Event::kEval:
      m.eval();
      break;
    case Event::kParamInPlace:
      mul_(m.param("w"), 0.9);
      add_(m.child("lin")->param("weight"), full({}, 0.1));
      break;
    case Event::kSetParameter:
      m.child("lin")->set_parameter("weight", mul(m.child("lin")->param("weight"), 0.8));
      break;
    case Event::kSwapChild: {
      auto lin = nn::make<nn::Linear>(d, d);
      Generator g(c.seed + 7);
      for (auto& [name, t] : lin->named_parameters())
        t.copy_(randn(to_shape(t.shape()), DType::f32, &g));
      lin->train(m.is_training());
      m.set_child("lin", lin);
      break;
    }
    case Event::kParamAssign:
      m.param("w") = mul(m.param("w"), 1.1);
      break;
  }
}

// Empty when got matches want: shape, values, and the strides of dims with more than one element.
std::string compare_tensor(const Tensor& got, const Tensor& want) {
  if (got.shape() != want.shape())
    return "shape " + got.shape_string() + ", eager " + want.shape_string();
  if (got.dtype() != want.dtype()) return "dtype differs: " + got.shape_string();
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < w.size(); ++i) {
    const bool both_nan = std::isnan(g[i]) && std::isnan(w[i]);
    if (!both_nan && !(std::abs(g[i] - w[i]) <= 1e-5 * (1 + std::abs(w[i]))))
      return "element " + std::to_string(i) + " is " + std::to_string(g[i]) + ", eager " +
             std::to_string(w[i]) + " (" + want.shape_string() + ")";
  }
  if (want.numel() > 0) {
    const auto gs = got.int_strides(), ws = want.int_strides();
    for (size_t d = 0; d < ws.size(); ++d)
      if (want.shape()[d] > 1 && gs[d] != ws[d]) {
        std::ostringstream os;
        os << "strides [";
        for (size_t k = 0; k < gs.size(); ++k) os << (k ? "," : "") << gs[k];
        os << "], eager [";
        for (size_t k = 0; k < ws.size(); ++k) os << (k ? "," : "") << ws[k];
        os << "] (" << want.shape_string() << ")";
        return os.str();
      }
  }
  return "";
}

struct World {
  std::shared_ptr<FuzzModule> module;
  std::optional<CompiledFunction> fn;  // none: eager
};

World make_world(const std::shared_ptr<const Program>& p, uint64_t seed, std::optional<Variant> v) {
  World w;
  w.module = nn::make<FuzzModule>(p, seed);
  if (!v) return w;
  if (*v == Variant::kLazy) {
    w.module->to(Device::lazy());
    return w;
  }
  CompileOptions o;
  o.name = "fuzz";
  if (*v == Variant::kStatic) o.dynamic = DynamicPolicy::kStatic;
  if (*v == Variant::kDynamic) o.dynamic = DynamicPolicy::kDynamic;
  if (*v == Variant::kLambda) {
    auto m = w.module;
    w.fn = compile([m](const std::vector<Tensor>& x) { return m->forward_all(x); }, o);
  } else {
    w.fn = compile(std::static_pointer_cast<nn::Module>(w.module), o);
  }
  return w;
}

bool has_step(const Program& p, OpKind k) {
  for (const Step& s : p.steps)
    if (s.kind == k) return true;
  return false;
}

// Runs the calls eagerly and through one compiled variant; the first difference, or nothing.
std::optional<std::string> run_variant(const Program& program, const std::vector<Call>& calls,
                                       uint64_t seed, Variant variant,
                                       const std::set<Feature>& features) {
  auto p = std::make_shared<const Program>(program);
  World eager = make_world(p, seed, std::nullopt);
  World comp = make_world(p, seed, variant);
  for (size_t i = 0; i < calls.size(); ++i) {
    Call c = calls[i];
    if (variant == Variant::kLazy) c.layout = c.lazy_layout;
    const std::string where = "call " + std::to_string(i) + " (" + variant_name(variant) + "): ";
    apply_event(*eager.module, c, program.d);
    apply_event(*comp.module, c, program.d);
    const bool lazy = variant == Variant::kLazy;
    if (lazy) comp.module->to(Device::lazy());  // a swapped-in child is made on the CPU
    std::vector<Tensor> ea = make_args(program, c),
                        ca = make_args(program, c, lazy ? Device::lazy() : Device::cpu());
    // Item 5: under kDynamic, D (the last dim, pinned by matmul/linear/reshape) is a symbol that
    // is specialized after views recorded types with it; keep it static unless enabled.
    if (variant == Variant::kDynamic && !features.count(Feature::kDynamicLastDim))
      for (const Tensor& t : ca) mark_static(t, -1);
    std::vector<Tensor> eo, co;
    std::string eerr, cerr;
    try {
      eo = eager.module->forward_all(ea);
    } catch (const std::exception& e) {
      eerr = e.what();
    }
    try {
      if (lazy) {
        co = comp.module->forward_all(ca);
        lathe::sync();
      } else {
        co = (*comp.fn)(ca);
      }
    } catch (const std::exception& e) {
      cerr = e.what();
    }
    if (!eerr.empty() || !cerr.empty()) {
      if (eerr.empty()) return where + "compiled threw, eager did not: " + cerr;
      if (cerr.empty()) return where + "eager threw, compiled did not: " + eerr;
      // Both rejected the call: continue from eager's state.
      auto es = eager.module->state_dict(), cs = comp.module->state_dict();
      for (auto& [k, t] : cs) t.copy_(es.at(k));
      continue;
    }
    if (eo.size() != co.size()) return where + "number of outputs differs";
    for (size_t j = 0; j < eo.size(); ++j)
      if (auto d = compare_tensor(co[j], eo[j]); !d.empty())
        return where + "output " + std::to_string(j) + ": " + d;
    for (size_t j = 0; j < ea.size(); ++j)
      if (auto d = compare_tensor(ca[j], ea[j]); !d.empty())
        return where + "argument " + std::to_string(j) + " after the call: " + d;
    auto es = eager.module->state_dict(), cs = comp.module->state_dict();
    for (auto& [k, t] : es)
      if (auto d = compare_tensor(cs.at(k), t); !d.empty())
        return where + "module state '" + k + "' after the call: " + d;
    // The caller owns the outputs and may write into them: nothing of a later call may change.
    for (Tensor& o : eo) o.fill_(7.0);
    for (Tensor& o : co) o.fill_(7.0);
    for (size_t j = 0; j < ea.size(); ++j)
      if (auto d = compare_tensor(ca[j], ea[j]); !d.empty())
        return where + "argument " + std::to_string(j) + " after writing into the outputs: " + d;
  }
  return std::nullopt;
}

std::vector<Variant> variants_for(const Program& p, const std::set<Feature>& features) {
  std::vector<Variant> v = {Variant::kDefault, Variant::kStatic};
  // Item 6: kDynamic with a train-mode BatchNorm fails with a raw SymInt error.
  if (!has_step(p, OpKind::kConvBlock) || features.count(Feature::kDynamicTrainBn))
    v.push_back(Variant::kDynamic);
  if (features.count(Feature::kLambdaModule)) v.push_back(Variant::kLambda);
  v.push_back(Variant::kLazy);
  return v;
}

std::optional<std::string> run_case(const Program& p, const std::vector<Call>& calls, uint64_t seed,
                                    const std::set<Feature>& features) {
  for (Variant v : variants_for(p, features))
    if (auto f = run_variant(p, calls, seed, v, features)) return f;
  return std::nullopt;
}

std::vector<Call> generate_calls(std::mt19937_64& rng, const Program& p,
                                 const std::set<Feature>& features) {
  auto u = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  std::vector<Event> events = {Event::kNone,     Event::kNone,         Event::kTrain,
                               Event::kEval,     Event::kParamInPlace, Event::kSetParameter,
                               Event::kSwapChild};
  if (features.count(Feature::kParamAssign)) events.push_back(Event::kParamAssign);
  std::vector<int64_t> sizes = {2, 3, 5, 2, 3, 5, 1, 0};
  if (has_step(p, OpKind::kFlatten) && !features.count(Feature::kZeroSizeReshape)) sizes.back() = 1;
  std::vector<Call> calls(static_cast<size_t>(u(3, 6)));
  for (size_t i = 0; i < calls.size(); ++i) {
    Call& c = calls[i];
    // The first call has ordinary sizes; later ones change them (sometimes to 0 or 1).
    c.b = i == 0 ? u(2, 3) : sizes[u(0, sizes.size() - 1)];
    c.s = i == 0 ? u(3, 4) : (u(0, 2) == 0 ? calls[i - 1].s : sizes[u(0, sizes.size() - 1)]);
    c.layout = static_cast<Layout>(u(0, 2));
    c.lazy_layout = c.layout;
    // reshape_non_contiguous off: flatten programs get contiguous arguments only.
    if (has_step(p, OpKind::kFlatten) && !features.count(Feature::kReshapeNonContiguous))
      c.layout = Layout::kContiguous;
    c.alias = !p.arg1_broadcast && u(0, 4) == 0;
    c.event = i == 0 ? Event::kNone : events[u(0, events.size() - 1)];
    c.seed = static_cast<uint64_t>(u(0, 1 << 30));
  }
  return calls;
}

// Drops steps, then calls, while the case still fails.
void shrink(Program& p, std::vector<Call>& calls, uint64_t seed, const std::set<Feature>& features,
            std::string& failure) {
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t k = 0; k < p.steps.size() && !progress; ++k) {
      Program q = drop_step(p, k);
      if (auto f = run_case(q, calls, seed, features)) p = q, failure = *f, progress = true;
    }
    for (size_t i = 0; i < calls.size() && calls.size() > 1 && !progress; ++i) {
      std::vector<Call> fewer = calls;
      fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(i));
      if (auto f = run_case(p, fewer, seed, features)) calls = fewer, failure = *f, progress = true;
    }
    for (size_t i = 0; i < calls.size() && !progress; ++i) {
      if (calls[i].event == Event::kNone) continue;
      std::vector<Call> plain = calls;
      plain[i].event = Event::kNone;
      if (auto f = run_case(p, plain, seed, features)) calls = plain, failure = *f, progress = true;
    }
  }
}

uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

TEST(CompileFuzz, CompiledCallsMatchEager) {
  const uint64_t base = env_u64("LATHE_FUZZ_SEED", 20261203);
  const uint64_t cases = env_u64("LATHE_FUZZ_CASES", 600);
  const double max_seconds = static_cast<double>(env_u64("LATHE_FUZZ_SECONDS", 90));
  const std::set<Feature> features = enabled_features();
  std::string on;
  for (Feature f : features) on += std::string(on.empty() ? "" : ",") + feature_name(f);
  std::printf("[fuzz] seed %llu, %llu cases, generator features on: %s\n",
              static_cast<unsigned long long>(base), static_cast<unsigned long long>(cases),
              on.empty() ? "none" : on.c_str());
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  int failures = 0, programs_rejected = 0, calls_run = 0;
  uint64_t run = 0;
  for (uint64_t i = 0; i < cases && failures < 5; ++i, ++run) {
    if (max_seconds > 0 && elapsed() > max_seconds) {
      std::printf("[fuzz] time limit of %.0f s reached (LATHE_FUZZ_SECONDS)\n", max_seconds);
      break;
    }
    const uint64_t seed = base + i;
    std::mt19937_64 rng(seed);
    Program p;
    std::vector<Call> calls;
    // A program must run eagerly on its first call (sizes that every op accepts).
    for (int tries = 0;; ++tries) {
      p = generate_program(rng, static_cast<int>(std::uniform_int_distribution<int>(2, 8)(rng)),
                           features);
      calls = generate_calls(rng, p, features);
      auto m = nn::make<FuzzModule>(std::make_shared<const Program>(p), seed);
      try {
        m->forward_all(make_args(p, calls[0]));
        break;
      } catch (const std::exception&) {
        ++programs_rejected;
      }
    }
    calls_run += static_cast<int>(calls.size());
    auto failure = run_case(p, calls, seed, features);
    if (!failure) continue;
    ++failures;
    shrink(p, calls, seed, features, *failure);
    std::ostringstream os;
    os << "[fuzz] case seed " << seed << " (rerun: LATHE_FUZZ_SEED=" << seed
       << " LATHE_FUZZ_CASES=1" << (on.empty() ? "" : " LATHE_FUZZ_ENABLE=" + on) << ")\n"
       << *failure << "\nminimal program (module m, arguments arg0, arg1):\n"
       << p.to_string() << "calls:\n";
    for (size_t k = 0; k < calls.size(); ++k)
      os << "  #" << k << ": " << calls[k].to_string(p) << "\n";
    ADD_FAILURE() << os.str();
  }
  std::printf("[fuzz] %llu cases, %d calls, %d programs regenerated, %d failures, %.1f s\n",
              static_cast<unsigned long long>(run), calls_run, programs_rejected, failures,
              elapsed());
  EXPECT_GT(calls_run, 0);
}

// The comparison catches each kind of difference it is meant to.
TEST(CompileFuzz, ComparisonSeesValuesShapesAndStrides) {
  Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(compare_tensor(a, a.clone()), "");
  EXPECT_NE(compare_tensor(mul(a, 1.001), a), "");
  EXPECT_NE(compare_tensor(a.reshape({3, 2}), a), "");
  Tensor t = from_vector<float>({1, 4, 2, 5, 3, 6}, {3, 2}).transpose(0, 1);  // a's values
  EXPECT_EQ(compare_tensor(t.contiguous(), a), "");
  EXPECT_NE(compare_tensor(t, a).find("strides [1,2], eager [3,1]"), std::string::npos)
      << compare_tensor(t, a);
}

// The generator and shrinker themselves: programs are reproducible from the seed, and dropping a
// step removes exactly the steps that depend on it.
TEST(CompileFuzz, GeneratorIsReproducibleAndShrinkDropsDependents) {
  std::mt19937_64 a(5), b(5);
  const Program p = generate_program(a, 8, {});
  EXPECT_EQ(p.to_string(), generate_program(b, 8, {}).to_string());
  // 8 steps, and a third of the programs a branch on data inserted among them.
  int branches = 0;
  for (const Step& st : p.steps) branches += st.kind == OpKind::kBranch;
  EXPECT_EQ(p.steps.size(), 8u + branches);
  EXPECT_LE(branches, 1);
  Program chain;
  chain.steps = {Step{OpKind::kUnary, 0, -1, 0, 0, 0, 0, "relu"},
                 Step{OpKind::kUnary, 2, -1, 0, 0, 0, 0, "neg"},
                 Step{OpKind::kBinary, 0, 1, 0, 0, 0, 0, "add"}};
  chain.outputs = {3, 4};
  Step branch;
  branch.kind = OpKind::kBranch;
  branch.a = 0;
  const Program inserted = insert_step(chain, 1, branch);  // before neg: value 3, later ones +1
  ASSERT_EQ(inserted.steps.size(), 4u);
  EXPECT_EQ(inserted.steps[1].kind, OpKind::kBranch);
  EXPECT_EQ(inserted.steps[2].a, 2);  // neg still reads relu
  EXPECT_EQ(inserted.outputs, (std::vector<int>{4, 5, 3}));
  const Program q = drop_step(chain, 0);  // drops relu and the neg that reads it
  ASSERT_EQ(q.steps.size(), 1u);
  EXPECT_EQ(q.steps[0].name, "add");
  EXPECT_EQ(q.outputs, std::vector<int>{2});
  EXPECT_NE(q.to_string().find("Tensor v2 = add(arg0, arg1);"), std::string::npos) << q.to_string();
}

}  // namespace
}  // namespace lathe::fuzz
