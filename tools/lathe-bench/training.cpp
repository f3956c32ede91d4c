#include "tools/lathe-bench/training.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "lathe/core/grad_mode.h"
#include "lathe/core/random.h"
#include "lathe/core/threads.h"
#include "lathe/distributed/ddp.h"
#include "lathe/lazy/lazy.h"
#include "lathe/models/registry.h"
#include "lathe/ops/autocast.h"
#include "lathe/ops/ops.h"
#include "lathe/optim/optimizer.h"
#include "lathe/trace/compile.h"

namespace lathe_bench {
namespace {

using lathe::DType;
using lathe::Tensor;
using Clock = std::chrono::steady_clock;

constexpr double kLearningRate = 0.01;
constexpr double kMomentum = 0.9;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double geomean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += std::log(x);
  return v.empty() ? NAN : std::exp(s / static_cast<double>(v.size()));
}

// vit built for --image-size (the same layers; fewer patches, a shorter position embedding).
std::optional<lathe::models::ViTConfig> vit_config(const std::string& name,
                                                   const TrainingOptions& o) {
  if (name != "vit" || o.image_size == 0) return std::nullopt;
  lathe::models::ViTConfig c = lathe::models::vit_base_patch16_224_config();
  c.img_size = o.image_size;
  return c;
}

// Inputs at the benchmark's batch (images channels-last, as the inference harness), in `dtype`.
std::vector<Tensor> make_inputs(const std::string& name, const TrainingOptions& o, DType dtype) {
  lathe::models::InputOptions io;
  io.image_size = o.image_size;
  if (o.seq_len > 0) io.seq_len = o.seq_len;
  io.vit = vit_config(name, o);
  std::vector<Tensor> inputs = lathe::models::default_inputs(name, o.batch, 1, io);
  for (auto& t : inputs) {
    if (!lathe::is_floating(t.dtype())) continue;
    t = t.to(dtype);
    if (t.dim() == 4) t = t.to_channels_last();
  }
  return inputs;
}

// The synthetic task: every 2-d output [B, K] is a class prediction and every 3-d output
// [B, S, K] a token prediction, each with uniformly drawn labels in [0, K) (CNNs and vit: one
// class loss on the logits; bert: a token loss on the last hidden state plus a class loss on
// the pooled output, so every parameter gets a gradient). The loss is the sum of the
// cross-entropies. Labels depend only on the output shapes (fixed seed).
class SyntheticLoss {
 public:
  Tensor operator()(const std::vector<Tensor>& outputs) {
    if (labels_.empty()) {
      lathe::Generator gen(1234);
      for (const Tensor& out : outputs) {
        const int64_t classes = out.shape().back(), n = out.numel() / classes;
        // On the outputs' device (the lazy device when the model trains there). A data-parallel
        // rank draws the whole batch's labels and keeps its share (its rows of the batch).
        Tensor all = lathe::randint(0, classes, {n * world_}, DType::i64, &gen);
        if (world_ > 1) all = all.narrow(0, rank_ * n, n).contiguous();
        labels_.push_back(all.to(out.device()));
      }
    }
    Tensor loss;
    for (size_t i = 0; i < outputs.size(); ++i) {
      const int64_t classes = outputs[i].shape().back();
      Tensor logits = outputs[i].dim() == 2
                          ? outputs[i]
                          : outputs[i].reshape({outputs[i].numel() / classes, classes});
      Tensor l = lathe::cross_entropy(logits, labels_[i]);
      loss = loss.defined() ? lathe::add(loss, l) : l;
    }
    return loss;
  }

  bool has_labels() const { return !labels_.empty(); }
  // This process trains rows [rank * b, (rank + 1) * b) of a batch of world * b.
  void shard(int rank, int world) {
    rank_ = rank;
    world_ = world;
  }

 private:
  std::vector<Tensor> labels_;
  int rank_ = 0, world_ = 1;
};

// A model set up for training: train mode, parameters requiring grad, SGD with momentum.
struct TrainingModel {
  std::shared_ptr<lathe::models::ModelSpec> spec;
  std::vector<std::pair<std::string, Tensor>> params;
  std::unique_ptr<lathe::optim::SGD> opt;
  SyntheticLoss loss;
  bool amp = false;  // forward and loss under lathe::AutocastGuard (TrainingOptions::amp)
};

// `deterministic` puts the dropout layers in eval mode (the fp64 reference and the f32 run would
// draw different masks); BatchNorm stays in training mode. `device`: where the parameters live
// (the lazy device for the "lazy" backend).
std::unique_ptr<TrainingModel> make_training_model(const std::string& name,
                                                   const TrainingOptions& o, DType dtype,
                                                   bool deterministic,
                                                   lathe::Device device = lathe::Device::cpu()) {
  auto m = std::make_unique<TrainingModel>();
  lathe::models::ModelOptions options;
  options.seed = 0;
  options.vit = vit_config(name, o);
  m->spec = lathe::models::create_model(name, options);
  if (dtype != DType::f32) m->spec->module->to(dtype);
  if (device.kind() != lathe::DeviceKind::cpu) m->spec->module->to(device);
  m->spec->module->train();
  if (deterministic)
    for (auto& [path, mod] : m->spec->module->named_modules())
      if (mod->type_name() == "Dropout") mod->eval();
  m->params = m->spec->module->named_parameters();
  std::vector<Tensor> ps;
  for (auto& [n, p] : m->params) ps.push_back(p.set_requires_grad(true));
  lathe::optim::SGDOptions so;
  so.lr = kLearningRate;
  so.momentum = kMomentum;
  m->opt = std::make_unique<lathe::optim::SGD>(ps, so);
  return m;
}

// One eager training step; returns the loss.
Tensor eager_step(TrainingModel& m, const std::vector<Tensor>& inputs) {
  m.opt->zero_grad();
  Tensor loss;
  {
    lathe::AutocastGuard autocast(DType::bf16, m.amp);
    loss = m.loss(m.spec->forward(inputs));
  }
  loss.backward();
  m.opt->step();
  return loss;
}

using StepFn = std::function<void(const std::vector<Tensor>&)>;

// The training step per backend. "compile[@B]" is AOT autograd: lathe::compile of forward + loss
// traces once in training mode, and backward() on the compiled loss runs the compiled backward
// (one autograd node) that fills the parameters' grads; the optimizer step stays eager. "lazy"
// ("trace every time") runs the eager step on a model whose parameters live on the lazy device:
// forward, backward (the autograd engine records the vjps there too) and the SGD update are
// recorded and run as one graph at the sync that ends the step.
bool backend_trains(const std::string& backend, std::string* why) {
  if (backend == "eager" || backend == "lazy" || backend == "compile" ||
      backend.rfind("compile@", 0) == 0)
    return true;
  *why = "n/a (no training step for this backend)";
  return false;
}

lathe::Device backend_device(const std::string& backend) {
  return backend == "lazy" ? lathe::Device::lazy() : lathe::Device::cpu();
}

StepFn make_backend_step(const std::string& backend, TrainingModel& m) {
  if (backend == "eager") return [&m](const std::vector<Tensor>& in) { eager_step(m, in); };
  if (backend == "lazy") {
    auto on_device = std::make_shared<std::vector<Tensor>>();
    return [&m, on_device](const std::vector<Tensor>& in) {
      if (on_device->empty())  // the inputs moved once, as a data loader would have them there
        for (const Tensor& t : in) on_device->push_back(t.to(lathe::Device::lazy()));
      eager_step(m, *on_device);
      lathe::sync();
    };
  }
  if (backend != "compile" && backend.rfind("compile@", 0) != 0)
    throw lathe::Error(
        lathe::detail::str("[lathe-bench] no training step for backend '", backend, "'"));
  lathe::CompileOptions options;
  if (backend.rfind("compile@", 0) == 0) options.backend = backend.substr(8);
  options.name = "train_step";
  auto compiled = std::make_shared<lathe::CompiledFunction>(lathe::compile(
      [&m](const std::vector<Tensor>& in) { return m.loss(m.spec->forward(in)); }, options));
  return [&m, compiled](const std::vector<Tensor>& in) {
    // The synthetic labels are drawn from the output shapes on first use: draw them eagerly
    // (no grad) so that the trace captures them as data instead of recording the random draw.
    if (!m.loss.has_labels()) {
      lathe::NoGradGuard no_grad;
      lathe::AutocastGuard autocast(DType::bf16, m.amp);
      m.loss(m.spec->forward(in));
    }
    m.opt->zero_grad();
    Tensor loss;
    {
      lathe::AutocastGuard autocast(DType::bf16, m.amp);
      loss = (*compiled)(in)[0];
    }
    // Past the recompile limit a compiled function runs eagerly: never report that as compile.
    if (loss.grad_fn_name() != "compiled_backward")
      throw lathe::Error(lathe::detail::str("[lathe-bench] the compiled training step of ",
                                            m.spec->name, " ran without its compiled backward (",
                                            compiled->last_recompile_reason(), ")"));
    loss.backward();
    m.opt->step();
  };
}

struct TrainRow {
  std::string model;
  std::vector<double> ms;  // per backend; NAN where the backend has no training step
  std::vector<std::string> why;
  double compile_s = NAN;
};

TrainRow bench_model(const std::string& name, const TrainingOptions& o) {
  TrainRow row;
  row.model = name;
  const auto t_build = Clock::now();
  // One model per backend (steps change the weights; each backend trains its own copy).
  std::vector<std::unique_ptr<TrainingModel>> models;
  std::vector<StepFn> steps;
  std::vector<int> active;
  for (size_t k = 0; k < o.backends.size(); ++k) {
    std::string why;
    models.push_back(nullptr);
    steps.push_back(nullptr);
    if (backend_trains(o.backends[k], &why)) {
      models.back() =
          make_training_model(name, o, DType::f32, false, backend_device(o.backends[k]));
      models.back()->amp = o.amp;
      steps.back() = make_backend_step(o.backends[k], *models.back());
      active.push_back(static_cast<int>(k));
    }
    row.why.push_back(why);
  }
  const double build_s = seconds_since(t_build);
  const std::vector<Tensor> inputs = make_inputs(name, o, DType::f32);
  for (int k : active) {
    const auto t0 = Clock::now();
    steps[k](inputs);  // first call: a compiled step traces and compiles here
    if (o.backends[k] != "eager") row.compile_s = seconds_since(t0);
  }
  for (int i = 0; i < o.warmup; ++i)
    for (int k : active) steps[k](inputs);
  std::vector<std::vector<double>> ms(o.backends.size());
  for (int i = 0; i < o.repeat; ++i) {
    for (size_t j = 0; j < active.size(); ++j) {  // alternating, rotating the first
      const int k = active[(i + j) % active.size()];
      const auto t0 = Clock::now();
      steps[k](inputs);
      ms[k].push_back(seconds_since(t0) * 1e3);
    }
  }
  for (auto& v : ms) row.ms.push_back(v.empty() ? NAN : median(v));
  std::ostringstream line;
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "[lathe-bench] %s training step, batch %lld (built in %.1f s):", name.c_str(),
                static_cast<long long>(o.batch), build_s);
  line << buf;
  for (size_t k = 0; k < o.backends.size(); ++k) {
    if (std::isnan(row.ms[k]))
      std::snprintf(buf, sizeof buf, " %s %s", o.backends[k].c_str(), row.why[k].c_str());
    else
      std::snprintf(buf, sizeof buf, " %s %.2f ms", o.backends[k].c_str(), row.ms[k]);
    line << buf;
  }
  std::cerr << line.str() << std::endl;
  return row;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to_vector<double>()) m = std::max(m, std::abs(v));
  return m;
}

// max |a - b| (infinite on a size mismatch or a NaN).
double max_abs_diff(const Tensor& a, const Tensor& b) {
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  if (x.size() != y.size()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = std::abs(x[i] - y[i]);
    if (!(d <= m)) m = std::isnan(d) ? INFINITY : d;
  }
  return m;
}

// The accuracy check, per tensor (gradient or updated parameter): max |got - ref| within
// tolerance x max |ref| (relative to the tensor's scale, not per element: gradients span many
// magnitudes within one tensor, and its small elements carry the rounding of its large terms),
// or within kNoiseFactor x the tensor's f32 rounding noise. The second bound is for tensors whose
// value f32 cannot resolve, in PyTorch as in Lathe (PyTorch's own f32 step differs from its f64
// step the same way): a gradient that is zero by structure but a sum of nonzero terms (the bias
// of a BatchNorm whose output feeds a 1x1 conv and a training-mode BatchNorm, as in
// mobilenet_v2's and mnasnet's projections; bert's attention key bias, to which softmax is
// invariant), or one that BatchNorm's backward computes as the small difference of large terms
// (deep bottlenecks of resnet50 and resnext50 at random init: PyTorch's f32 gradients differ
// from its f64 ones by up to 0.2-0.6 x max |ref| there). The noise is measured, not assumed:
// the difference between the eager step and the eager step of a twin whose parameters are moved
// by 2^-18 relative; rounding in a different order moves such tensors by the same amount. The
// size is the rounding of an f32 dot product over ~1000 terms (about sqrt(1000) ulps, 2^-19):
// moved by 2^-22 (two ulps), resnext50's layer4 BatchNorm gradients on oneDNN's AVX2 kernels
// moved 6-200x less than eager moves from fp64; by 2^-20, 3.7x less; by 2^-18, no more than
// eager's own error. One difference is one sample of the noise, so the noise is the largest
// difference between any two of the eager step and kNoiseTwins twins, each from its own seed.
// A 1% error still fails (tests: lathe_bench.training_accuracy_detects_errors*).
constexpr double kNoiseFactor = 4;
constexpr int kNoiseTwins = 2;

// Moves every parameter by a relative 2^-18 or less (about 16 f32 ulps), from the given seed.
void perturb_parameters(TrainingModel& m, uint64_t seed) {
  lathe::NoGradGuard no_grad;
  lathe::Generator gen(seed);
  constexpr double kRelative = 1.0 / (1 << 18);
  for (auto& [n, p] : m.params) {
    const Tensor u = lathe::rand(p.sizes(), p.dtype(), &gen);  // [0, 1)
    p.copy_(lathe::mul(p, lathe::add(lathe::mul(u, 2 * kRelative), 1.0 - kRelative)));
  }
}

// After one step: every parameter's gradient and updated value, by "name.grad" / "name".
std::map<std::string, Tensor> one_step_state(TrainingModel& m, const StepFn& step,
                                             const std::vector<Tensor>& in) {
  step(in);
  std::map<std::string, Tensor> r;
  for (auto& [n, p] : m.params) {
    if (p.grad().defined())
      r[n + ".grad"] = p.grad().detach().to(lathe::Device::cpu()).to(DType::f64);
    r[n] = p.detach().to(lathe::Device::cpu()).to(DType::f64);
  }
  return r;
}

}  // namespace

int run_training_performance(const TrainingOptions& o, const std::vector<std::string>& names) {
  std::vector<TrainRow> rows;
  for (const auto& n : names) rows.push_back(bench_model(n, o));
  const auto& b = o.backends;
  const bool has_compile = std::find(b.begin(), b.end(), "compile") != b.end();
  std::ostringstream md;
  md << "| model | " << b[0] << " ms |";
  for (size_t k = 1; k < b.size(); ++k) md << " " << b[k] << " |";
  if (has_compile) md << " compile s |";
  md << "\n| --- | ---: |";
  for (size_t k = 1; k < b.size(); ++k) md << " ---: |";
  if (has_compile) md << " ---: |";
  md << "\n";
  std::vector<std::vector<double>> speedups(b.size());
  char buf[64];
  for (const TrainRow& r : rows) {
    std::snprintf(buf, sizeof buf, "%.2f", r.ms[0]);
    md << "| " << r.model << " | " << buf << " |";
    for (size_t k = 1; k < b.size(); ++k) {
      if (std::isnan(r.ms[k])) {
        md << " " << r.why[k] << " |";
        continue;
      }
      speedups[k].push_back(r.ms[0] / r.ms[k]);
      std::snprintf(buf, sizeof buf, "%.2fx", r.ms[0] / r.ms[k]);
      md << " " << buf << " |";
    }
    if (has_compile) {
      std::snprintf(buf, sizeof buf, "%.2f", r.compile_s);
      md << " " << (std::isnan(r.compile_s) ? std::string("n/a") : std::string(buf)) << " |";
    }
    md << "\n";
  }
  md << "| geomean | |";
  for (size_t k = 1; k < b.size(); ++k) {
    std::snprintf(buf, sizeof buf, "%.2fx", geomean(speedups[k]));
    md << " " << (speedups[k].empty() ? std::string("n/a") : std::string(buf)) << " |";
  }
  if (has_compile) md << " |";
  md << "\n";
  std::cout << "lathe-bench --performance --training, batch " << o.batch << ", "
            << lathe::num_threads() << " threads, median of " << o.repeat
            << " alternating steps (forward, cross-entropy on synthetic labels, backward, SGD "
               "momentum "
            << kMomentum << (o.amp ? "; bf16 autocast in forward and loss" : "")
            << "); speedup = " << b[0] << " ms / backend ms\n\n"
            << md.str();
  if (o.csv.empty()) return 0;
  std::ofstream csv(o.csv);
  if (!csv) {
    std::cerr << "lathe-bench: cannot write " << o.csv << "\n";
    return 1;
  }
  csv << "model,batch,threads";
  for (const auto& n : b) csv << "," << n << "_step_ms";
  csv << ",compile_s\n";
  for (const TrainRow& r : rows) {
    csv << r.model << "," << o.batch << "," << lathe::num_threads();
    for (double x : r.ms) csv << "," << (std::isnan(x) ? std::string("n/a") : std::to_string(x));
    csv << "," << (std::isnan(r.compile_s) ? std::string("n/a") : std::to_string(r.compile_s))
        << "\n";
  }
  return 0;
}

int run_training_accuracy(const TrainingOptions& o, const std::vector<std::string>& names) {
  std::ostringstream md;
  md << "| model |";
  for (const auto& b : o.backends) md << " " << b << " |";
  md << "\n| --- |";
  for (size_t k = 0; k < o.backends.size(); ++k) md << " --- |";
  md << "\n";
  int failures = 0;
  for (const auto& name : names) {
    const auto t0 = Clock::now();
    auto ref_model = make_training_model(name, o, DType::f64, true);
    const std::map<std::string, Tensor> ref = one_step_state(
        *ref_model, make_backend_step("eager", *ref_model), make_inputs(name, o, DType::f64));
    ref_model.reset();
    const std::vector<Tensor> inputs = make_inputs(name, o, DType::f32);
    // The f32 rounding noise of each tensor: the eager steps of the twins (parameters moved by
    // 2^-18 relative) against the plain eager step and each other.
    std::map<std::string, Tensor> eager;
    {
      auto m = make_training_model(name, o, DType::f32, true);
      eager = one_step_state(*m, make_backend_step("eager", *m), inputs);
    }
    std::map<std::string, double> noise;
    {
      // The eager step and the twins' steps, kept in f32 (the values are f32) to halve memory.
      std::vector<std::map<std::string, Tensor>> runs(1);
      for (const auto& [key, t] : eager) runs[0][key] = t.to(DType::f32);
      for (int k = 0; k < kNoiseTwins; ++k) {
        auto twin = make_training_model(name, o, DType::f32, true);
        perturb_parameters(*twin, 4321 + 1000 * k);
        std::map<std::string, Tensor> run;
        for (auto& [key, t] : one_step_state(*twin, make_backend_step("eager", *twin), inputs)) {
          if (!eager.count(key)) continue;
          const Tensor t32 = t.to(DType::f32);
          for (const auto& earlier : runs)
            noise[key] = std::max(noise[key], max_abs_diff(earlier.at(key), t32));
          run[key] = t32;
        }
        if (k + 1 < kNoiseTwins) runs.push_back(std::move(run));
      }
    }
    md << "| " << name << " |";
    std::ostringstream line;
    line << "[lathe-bench] " << name << " training accuracy (one SGD step vs fp64, " << ref.size()
         << " gradients and parameters, tolerance " << o.tolerance << "):";
    for (const std::string& b : o.backends) {
      std::string why;
      if (!backend_trains(b, &why)) {
        md << " " << why << " |";
        line << " " << b << " " << why;
        continue;
      }
      std::map<std::string, Tensor> got;
      if (b == "eager") {
        got = eager;
      } else {
        auto m = make_training_model(name, o, DType::f32, true, backend_device(b));
        got = one_step_state(*m, make_backend_step(b, *m), inputs);
      }
      if (b == o.inject_error)  // proves the check can fail (a test runs it)
        for (auto& [key, t] : got) t = lathe::mul(t, 1.01);
      bool ok = got.size() == ref.size();
      double worst_rel = 0;
      std::string worst;
      int within_noise = 0;    // tensors that pass by the noise bound only
      double noise_ratio = 0;  // their largest error / noise
      std::vector<std::pair<double, std::string>> failed;  // (error / bound, key), for the report
      for (const auto& [key, r] : ref) {
        auto it = got.find(key);
        if (it == got.end()) {
          ok = false;
          worst = key + " missing";
          continue;
        }
        const double err = max_abs_diff(it->second, r), scale = max_abs(r);
        const double rel = err == 0 ? 0 : scale > 0 ? err / scale : INFINITY;
        const double noise_bound = kNoiseFactor * noise[key];
        if (!(rel <= o.tolerance)) {
          if (err <= noise_bound) {
            ++within_noise;
            noise_ratio = std::max(noise_ratio, err / noise[key]);
          } else {
            ok = false;
            failed.emplace_back(err / std::max(o.tolerance * scale, noise_bound), key);
          }
        }
        if (!(rel <= worst_rel)) {
          worst_rel = rel;
          worst = key;
        }
      }
      if (!ok) ++failures;
      md << " " << (ok ? "pass" : "FAIL") << " |";
      char buf[240];
      std::snprintf(buf, sizeof buf,
                    " %s %s (worst %s: max abs err / max |ref| %.3g; %d within f32 noise only, "
                    "at most %.2fx the noise)",
                    b.c_str(), ok ? "pass" : "FAIL", worst.c_str(), worst_rel, within_noise,
                    noise_ratio);
      line << buf;
      if (!failed.empty()) {  // the worst few, to start an investigation from
        std::sort(failed.rbegin(), failed.rend());
        line << " [" << failed.size() << " over both bounds, error / larger bound:";
        for (size_t i = 0; i < std::min<size_t>(failed.size(), 5); ++i) {
          std::snprintf(buf, sizeof buf, " %s %.3g", failed[i].second.c_str(), failed[i].first);
          line << buf;
        }
        line << "]";
      }
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, " [%.1f s]", seconds_since(t0));
    std::cerr << line.str() << buf << std::endl;
    md << "\n";
  }
  std::cout << "lathe-bench --accuracy --training, batch " << o.batch
            << ", fp64 eager reference (dropout off, BatchNorm in training mode); pass: every "
               "gradient and updated parameter after one SGD step within "
            << o.tolerance << " x max |reference| of the reference, or within " << kNoiseFactor
            << "x the f32 rounding noise of that tensor (the largest difference between the "
               "eager step and "
            << kNoiseTwins << " eager steps with the parameters moved by 2^-18 relative)\n\n"
            << md.str();
  if (failures > 0) {
    std::cout << "\n" << failures << " failure(s)\n";
    return 1;
  }
  return 0;
}

// ---- --training --ddp N: one rank of a data-parallel step (started by lathe-run) ----

namespace {

// Median ms of `repeat` steps after `warmup`.
double time_steps(const StepFn& step, const std::vector<Tensor>& in, int warmup, int repeat) {
  for (int i = 0; i < warmup; ++i) step(in);
  std::vector<double> ms;
  for (int i = 0; i < repeat; ++i) {
    const auto t0 = Clock::now();
    step(in);
    ms.push_back(seconds_since(t0) * 1e3);
  }
  return median(ms);
}

// The gradients' difference at the model's scale: max |got - ref| over every gradient, divided
// by max |ref| over every gradient (per tensor, a gradient that is zero by structure, as bert's
// attention key bias, would make any rounding look like a 100% error).
double gradient_difference(const std::map<std::string, Tensor>& got,
                           const std::map<std::string, Tensor>& ref) {
  double diff = 0, scale = 0;
  for (const auto& [key, r] : ref) {
    if (key.size() < 5 || key.compare(key.size() - 5, 5, ".grad") != 0) continue;
    auto it = got.find(key);
    diff = std::max(diff, it == got.end() ? INFINITY : max_abs_diff(it->second, r));
    scale = std::max(scale, max_abs(r));
  }
  return diff == 0 ? 0 : scale > 0 ? diff / scale : INFINITY;
}

}  // namespace

int run_training_ddp(const TrainingOptions& o, const std::vector<std::string>& names) {
  auto group = lathe::distributed::init_process_group();
  const int rank = group->rank(), world = group->size();
  if (o.batch % world != 0) {
    std::cerr << "lathe-bench: --batch-size " << o.batch << " does not split over " << world
              << " ranks\n";
    return 2;
  }
  TrainingOptions local = o;
  local.batch = o.batch / world;
  std::ostringstream md;
  md << "| model | backend | 1 process ms | " << world << " ranks ms | speedup | "
     << "grad diff after 1 step | buckets (overlapping the backward) |\n"
     << "| --- | --- | --- | --- | --- | --- | --- |\n";
  for (const std::string& name : names) {
    for (const std::string& b : o.backends) {
      std::string why;
      if (!backend_trains(b, &why) || backend_device(b).kind() != lathe::DeviceKind::cpu) {
        if (rank == 0) md << "| " << name << " | " << b << " | n/a (no data-parallel step) |\n";
        continue;
      }
      const std::vector<Tensor> full = make_inputs(name, o, DType::f32);
      std::vector<Tensor> mine;
      for (const Tensor& t : full) mine.push_back(t.narrow(0, rank * local.batch, local.batch));
      // One process on the whole batch, with the threads of all the ranks (rank 0; the others
      // wait): the step the data-parallel one replaces, and its parameters after one step.
      std::map<std::string, Tensor> ref;
      double single_ms = NAN;
      if (rank == 0) {
        const int threads = lathe::num_threads();
        lathe::set_num_threads(threads * world);
        auto m = make_training_model(name, o, DType::f32, true);
        StepFn step = make_backend_step(b, *m);
        ref = one_step_state(*m, step, full);
        single_ms = time_steps(step, full, o.warmup, o.repeat);
        lathe::set_num_threads(threads);
      }
      group->barrier()->wait();
      auto m = make_training_model(name, local, DType::f32, true);
      m->loss.shard(rank, world);
      lathe::distributed::DistributedDataParallel ddp(m->spec->module, group);
      StepFn inner = make_backend_step(b, *m);
      StepFn step = [&ddp, inner](const std::vector<Tensor>& in) {
        ddp.sync_buffers();
        inner(in);
      };
      const std::map<std::string, Tensor> got = one_step_state(*m, step, mine);
      const double ddp_ms = time_steps(step, mine, o.warmup, o.repeat);
      group->barrier()->wait();
      if (rank != 0) continue;
      char buf[320];
      const auto& st = ddp.stats();
      std::snprintf(buf, sizeof buf,
                    "| %s | %s | %.1f | %.1f | %.2fx | %.2g | %zu (%lld of %lld) |\n", name.c_str(),
                    b.c_str(), single_ms, ddp_ms, single_ms / ddp_ms, gradient_difference(got, ref),
                    ddp.bucket_names().size(),
                    static_cast<long long>(st.buckets_started_during_backward),
                    static_cast<long long>(st.buckets_started));
      md << buf;
      std::cerr << "[lathe-bench] " << name << " " << b << " ddp: " << buf;
    }
  }
  if (rank == 0)
    std::cout << "lathe-bench --performance --training --ddp " << world << ", batch " << o.batch
              << " (" << local.batch << " per rank), " << lathe::num_threads()
              << " thread(s) per rank, median of " << o.repeat
              << " steps; 1 process: the whole batch with the threads of all ranks; grad diff: max "
                 "|ddp - 1 process| over all gradients of the first step / max |1 process "
                 "gradient| (dropout off; BatchNorm normalizes each rank's share, so CNNs "
                 "differ by more than rounding)\n\n"
              << md.str();
  return 0;
}

}  // namespace lathe_bench
