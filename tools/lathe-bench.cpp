// lathe-bench: the model zoo in Lathe's three modes: eager, lazy ("trace every time", the lazy
// device) and compile ("trace once", lathe::compile), after the shape of PyTorch's dynamo
// benchmark harness.
//
//   lathe-bench [--performance | --accuracy] [--inference | --training] [--only NAME]
//               [--backend eager,lazy,compile,compile@interpreter] [--trace-on-lazy]
//               [--randomize-input] [--batch-size N] [--repeat N] [--warmup N] [--threads N]
//               [--tolerance X] [--csv FILE] [--image-size N] [--seq-len N] [--blocked]
//               [--precision f32|bf16]
//
// --performance (the default) times every backend alternately in one run (median over --repeat
// timed calls after --warmup untimed ones; --blocked times each backend's calls back to back
// instead, after one more warm-up call, as the peers in bench/compare_peers.sh are timed: the
// weights of the backend being timed stay in cache between its calls) and prints a markdown table
// of speedups over the baseline: eager, or lazy with --trace-on-lazy (compile then traces on the
// lazy device).
// --accuracy compares each backend's outputs with an fp64 eager run of the same weights and
// inputs and exits 1 on any failure (`--inject-error BACKEND` scales that backend's outputs by
// 1.01: a self-test of the check).
// --training runs a training step instead of a forward (tools/lathe-bench/training.h): forward,
// cross-entropy on synthetic labels, backward, SGD with momentum; --accuracy --training compares
// gradients and updated parameters after one step with fp64 eager. --image-size sets the input
// size of the CNNs and of vit (224 by default; vit is then built for that size, with fewer
// patches) and --seq-len bert's sequence length (128 by default): small sizes make quick tests.
// --precision bf16 compiles with CompileOptions::precision = bf16 (convolutions and linear
// layers on bf16 kernels; eager and lazy stay f32); with --training (performance only) it trains
// every backend with mixed precision instead (AMP: forward and loss under lathe::AutocastGuard); a
// compile backend named with a ":bf16" suffix
// ("compile:bf16", "compile@cpu:bf16") does so on its own, to time f32 and bf16 side by side.
// Progress goes to stderr, one line per model. See docs/benchmarks.md. The modes' earlier names
// trace_everytime (lazy) and trace_once[@B] (compile[@B]) are accepted as aliases.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "lathe/backend/backend.h"
#include "lathe/core/grad_mode.h"
#include "lathe/core/threads.h"
#include "lathe/lazy/lazy.h"
#include "lathe/models/registry.h"
#include "lathe/ops/ops.h"
#include "lathe/trace/compile.h"
#include "tools/lathe-bench/training.h"

namespace {

using lathe::Device;
using lathe::DType;
using lathe::Tensor;
using Clock = std::chrono::steady_clock;

const std::vector<std::string> kBackends = {"eager", "lazy", "compile"};

// The mode's name for a --backend / --inject-error value: earlier names map to the current ones.
std::string canonical_backend(const std::string& b) {
  if (b == "trace_everytime") return "lazy";
  if (b.rfind("trace_once", 0) == 0) return "compile" + b.substr(10);
  return b;
}

bool is_compile(const std::string& b) { return b.rfind("compile", 0) == 0; }

// A compile backend's ":bf16" suffix ("compile:bf16", "compile@cpu:bf16"): that runner compiles
// with CompileOptions::precision = bf16, so f32 and bf16 time side by side in one run.
bool bf16_suffix(const std::string& b) {
  return b.size() > 5 && b.compare(b.size() - 5, 5, ":bf16") == 0;
}
std::string without_precision(const std::string& b) {
  return bf16_suffix(b) ? b.substr(0, b.size() - 5) : b;
}

struct Args {
  bool accuracy = false;
  bool training = false;
  int64_t image_size = 0;  // 0: the models' default (224)
  int64_t seq_len = 0;     // 0: bert's default (128)
  std::string only;
  std::vector<std::string> backends = kBackends;
  bool trace_on_lazy = false;
  bool randomize_input = false;
  bool blocked = false;  // time each backend's calls back to back instead of alternating
  int64_t batch = 1;
  int repeat = 30;
  int warmup = 3;
  int threads = 0;  // 0: leave lathe's default
  int ddp = 0;      // --ddp N: the training step data-parallel on N local ranks
  double tolerance = 1e-4;
  // --precision: the compile backends' CompileOptions::precision (eager and lazy compute in f32).
  DType precision = DType::f32;
  std::string csv;
  std::string inject_error;  // --accuracy self-test: this backend's outputs are scaled by 1.01
};

[[noreturn]] void usage(const std::string& error) {
  std::ostream& os = error.empty() ? std::cout : std::cerr;
  if (!error.empty()) os << "lathe-bench: " << error << "\n";
  os << "usage: lathe-bench [--performance | --accuracy] [--inference | --training]\n"
        "                   [--only NAME] [--backend eager,lazy,compile,compile@interpreter]\n"
        "                   [--trace-on-lazy] [--randomize-input] [--batch-size N] [--repeat N]\n"
        "                   [--warmup N] [--threads N] [--tolerance X] [--csv FILE]\n"
        "                   [--image-size N] [--seq-len N] [--blocked] [--precision f32|bf16]\n"
        "                   [--ddp N]  (with --training: data-parallel on N local ranks)\n"
        "models:";
  for (const auto& n : lathe::models::model_names()) os << " " << n;
  os << "\n";
  std::exit(error.empty() ? 0 : 2);
}

int64_t parse_int(const std::string& flag, const char* value, int64_t min) {
  if (value == nullptr) usage(flag + " needs a value");
  char* end = nullptr;
  long long v = std::strtoll(value, &end, 10);
  if (end == value || *end != '\0' || v < min)
    usage(flag + " needs an integer >= " + std::to_string(min) + ", got '" + value + "'");
  return v;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> r;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) r.push_back(item);
  return r;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    bool takes_value = true;
    if (f == "--help" || f == "-h") usage("");
    if (f == "--performance" || f == "--accuracy") {
      a.accuracy = f == "--accuracy";
      takes_value = false;
    } else if (f == "--inference") {
      takes_value = false;
    } else if (f == "--training") {
      a.training = true;
      takes_value = false;
    } else if (f == "--image-size") {
      a.image_size = parse_int(f, v, 32);
    } else if (f == "--seq-len") {
      a.seq_len = parse_int(f, v, 1);
    } else if (f == "--trace-on-lazy") {
      a.trace_on_lazy = true;
      takes_value = false;
    } else if (f == "--blocked") {
      a.blocked = true;
      takes_value = false;
    } else if (f == "--randomize-input") {
      a.randomize_input = true;
      takes_value = false;
    } else if (f == "--only") {
      if (v == nullptr) usage("--only needs a model name");
      a.only = v;
      const auto& names = lathe::models::model_names();
      if (std::find(names.begin(), names.end(), a.only) == names.end())
        usage("unknown model '" + a.only + "'");
    } else if (f == "--backend") {
      if (v == nullptr) usage("--backend needs a comma-separated list");
      a.backends = split(v);
      if (a.backends.empty()) usage("--backend needs at least one backend");
      for (auto& b : a.backends) {
        b = canonical_backend(b);
        if (bf16_suffix(b) && !is_compile(without_precision(b)))
          usage("':bf16' applies to compile backends only, got '" + b + "'");
        if (without_precision(b) == "compile") continue;
        if (b.rfind("compile@", 0) == 0) {
          const auto names = lathe::backend::backend_names();
          const std::string compiler = without_precision(b).substr(8);
          if (std::find(names.begin(), names.end(), compiler) == names.end())
            usage("unknown compile backend '" + compiler + "' in '" + b + "'");
          continue;
        }
        if (std::find(kBackends.begin(), kBackends.end(), b) == kBackends.end())
          usage("unknown backend '" + b +
                "' (known: eager, lazy, compile, compile@<compile backend>)");
      }
    } else if (f == "--precision") {
      if (v == nullptr || (std::string(v) != "f32" && std::string(v) != "bf16"))
        usage("--precision needs f32 or bf16");
      a.precision = std::string(v) == "bf16" ? DType::bf16 : DType::f32;
    } else if (f == "--batch-size") {
      a.batch = parse_int(f, v, 1);
    } else if (f == "--repeat") {
      a.repeat = static_cast<int>(parse_int(f, v, 1));
    } else if (f == "--warmup") {
      a.warmup = static_cast<int>(parse_int(f, v, 0));
    } else if (f == "--threads") {
      a.threads = static_cast<int>(parse_int(f, v, 1));
    } else if (f == "--ddp") {
      a.ddp = static_cast<int>(parse_int(f, v, 1));
    } else if (f == "--tolerance") {
      if (v == nullptr) usage("--tolerance needs a value");
      char* end = nullptr;
      a.tolerance = std::strtod(v, &end);
      if (end == v || *end != '\0' || !(a.tolerance > 0))
        usage(std::string("--tolerance needs a positive number, got '") + v + "'");
    } else if (f == "--inject-error") {
      if (v == nullptr) usage("--inject-error needs a backend name");
      a.inject_error = canonical_backend(v);
    } else if (f == "--csv") {
      if (v == nullptr) usage("--csv needs a file name");
      a.csv = v;
    } else {
      usage("unknown argument '" + f + "'");
    }
    if (takes_value) ++i;
  }
  if (a.image_size > 0 && !a.training) usage("--image-size applies to --training only");
  if (a.seq_len > 0 && !a.training) usage("--seq-len applies to --training only");
  if (a.training && a.trace_on_lazy) usage("--trace-on-lazy does not apply to --training");
  if (a.ddp > 0 && (!a.training || a.accuracy))
    usage("--ddp applies to --performance --training only");
  // The baseline always runs: eager, or lazy (model and inputs on the lazy device).
  const std::string base = a.trace_on_lazy ? "lazy" : "eager";
  auto it = std::find(a.backends.begin(), a.backends.end(), base);
  if (it != a.backends.end()) a.backends.erase(it);
  a.backends.insert(a.backends.begin(), base);
  return a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::vector<Tensor> to_device(const std::vector<Tensor>& ts, Device d) {
  std::vector<Tensor> r;
  r.reserve(ts.size());
  for (const Tensor& t : ts) r.push_back(t.to(d));
  return r;
}

// Model inputs at the benchmark's batch: images channels-last (convolutions run best in NHWC).
std::vector<Tensor> make_inputs(const std::string& name, int64_t batch, uint64_t seed) {
  std::vector<Tensor> inputs = lathe::models::default_inputs(name, batch, seed);
  for (auto& t : inputs)
    if (t.dim() == 4 && lathe::is_floating(t.dtype())) t = t.to_channels_last();
  return inputs;
}

// One way to run a model. call() runs one forward on inputs prepared by prepare() and returns
// when the outputs are computed (lazy outputs are synced, not copied back).
struct Runner {
  std::string name;
  bool lazy = false;  // model and inputs on the lazy device
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> call;
  std::vector<Tensor> prepare(const std::vector<Tensor>& cpu_inputs) const {
    return lazy ? to_device(cpu_inputs, Device::lazy()) : cpu_inputs;
  }
};

// The models a run needs: the CPU one (eager; compile without --trace-on-lazy) and the one
// moved to the lazy device (lazy; compile with --trace-on-lazy), same weights.
struct Models {
  std::shared_ptr<lathe::models::ModelSpec> cpu, lazy;
};

Models build_models(const std::string& name, const Args& a) {
  bool need_cpu = false, need_lazy = false;
  for (const auto& b : a.backends) {
    const bool once = is_compile(b);
    if (b == "eager" || (once && !a.trace_on_lazy)) need_cpu = true;
    if (b == "lazy" || (once && a.trace_on_lazy)) need_lazy = true;
  }
  lathe::models::ModelOptions options;
  options.seed = 0;
  Models m;
  if (need_cpu) m.cpu = lathe::models::create_model(name, options);
  if (need_lazy) {
    m.lazy = lathe::models::create_model(name, options);
    m.lazy->module->to(Device::lazy());
  }
  return m;
}

std::vector<Runner> make_runners(const Models& m, const Args& a) {
  std::vector<Runner> runners;
  for (const auto& b : a.backends) {
    Runner r;
    r.name = b;
    if (b == "eager") {
      auto spec = m.cpu;
      r.call = [spec](const std::vector<Tensor>& in) { return spec->forward(in); };
    } else if (b == "lazy") {
      auto spec = m.lazy;
      r.lazy = true;
      r.call = [spec](const std::vector<Tensor>& in) {
        std::vector<Tensor> out = spec->forward(in);
        lathe::sync();
        return out;
      };
    } else {
      auto spec = a.trace_on_lazy ? m.lazy : m.cpu;
      r.lazy = a.trace_on_lazy;
      lathe::CompileOptions options;
      options.name = spec->name;
      const std::string base = without_precision(b);
      if (base.rfind("compile@", 0) == 0) options.backend = base.substr(8);
      options.precision = bf16_suffix(b) ? DType::bf16 : a.precision;
      lathe::CompiledFunction f = lathe::compile(spec->module, options);
      // A compiled call leaves nothing pending (lazy results are device data): no sync.
      r.call = [f](const std::vector<Tensor>& in) { return f(in); };
    }
    runners.push_back(std::move(r));
  }
  return runners;
}

// ---------------------------------------------------------------------------------------------
// Performance

struct PerfRow {
  std::string model;
  std::vector<double> ms;       // per backend, median
  double compile_s = NAN;       // first compile call: trace + compile + one run
  double lazy_compile_s = NAN;  // the lazy device's backend compile in the first call
  lathe::lazy::Metrics lazy;    // of the timed lazy calls
  int64_t lazy_calls = 0;
};

void add_metrics(lathe::lazy::Metrics& sum, const lathe::lazy::Metrics& m) {
  sum.ops_traced += m.ops_traced;
  sum.compiles += m.compiles;
  sum.cache_hits += m.cache_hits;
  sum.trace_s += m.trace_s;
  sum.hash_s += m.hash_s;
  sum.compile_s += m.compile_s;
  sum.execute_s += m.execute_s;
}

// The model's progress line for stderr: per backend ms and speedup, compile time, lazy metrics.
std::string progress_line(const PerfRow& row, const std::vector<Runner>& runners, const Args& a,
                          double build_s) {
  std::ostringstream line;
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "[lathe-bench] %s batch %lld (built in %.1f s):", row.model.c_str(),
                static_cast<long long>(a.batch), build_s);
  line << buf;
  for (size_t k = 0; k < runners.size(); ++k) {
    std::snprintf(buf, sizeof buf, " %s %.2f ms (%.2fx)", runners[k].name.c_str(), row.ms[k],
                  row.ms[0] / row.ms[k]);
    line << buf << (k + 1 < runners.size() ? "," : "");
  }
  if (!std::isnan(row.compile_s)) {
    std::snprintf(buf, sizeof buf, "; compile first call %.2f s", row.compile_s);
    line << buf;
  }
  if (row.lazy_calls > 0) {
    const double n = static_cast<double>(row.lazy_calls);
    std::snprintf(buf, sizeof buf,
                  "; lazy first-call compile %.2f ms; lazy per call: %.0f ops traced, trace "
                  "%.3f ms, hash+lookup %.3f ms, compiles %lld, execute %.2f ms",
                  row.lazy_compile_s * 1e3, row.lazy.ops_traced / n, row.lazy.trace_s / n * 1e3,
                  row.lazy.hash_s / n * 1e3, static_cast<long long>(row.lazy.compiles),
                  row.lazy.execute_s / n * 1e3);
    line << buf;
  }
  return line.str();
}

PerfRow bench_model(const std::string& name, const Args& a) {
  const auto t_build = Clock::now();
  Models models = build_models(name, a);
  std::vector<Runner> runners = make_runners(models, a);
  const double build_s = seconds_since(t_build);
  PerfRow row;
  row.model = name;

  std::vector<Tensor> fixed = make_inputs(name, a.batch, 1);
  std::vector<std::vector<Tensor>> prepared;
  for (const Runner& r : runners) prepared.push_back(r.prepare(fixed));

  // First calls: compile traces and compiles here (timed as the compile time); the lazy
  // device compiles its graph. Then the untimed warm-up.
  for (size_t k = 0; k < runners.size(); ++k) {
    lathe::lazy::reset_metrics();
    const auto t0 = Clock::now();
    runners[k].call(prepared[k]);
    // The first compile backend listed (the default one in "eager,lazy,compile,...").
    if (is_compile(runners[k].name) && std::isnan(row.compile_s)) row.compile_s = seconds_since(t0);
    if (runners[k].name == "lazy") row.lazy_compile_s = lathe::lazy::metrics().compile_s;
  }
  for (int i = 0; i < a.warmup; ++i)
    for (size_t k = 0; k < runners.size(); ++k) runners[k].call(prepared[k]);

  // Timed calls: alternating backends (the starting backend rotates each round), or with
  // --blocked each backend's calls back to back after one more untimed call.
  std::vector<std::vector<double>> ms(runners.size());
  lathe::lazy::Metrics lazy_sum;
  auto timed_call = [&](size_t k) {
    const bool lazy_trace = runners[k].name == "lazy";
    if (lazy_trace) lathe::lazy::reset_metrics();
    const auto t0 = Clock::now();
    std::vector<Tensor> out = runners[k].call(prepared[k]);
    ms[k].push_back(seconds_since(t0) * 1e3);
    if (lazy_trace) {
      add_metrics(lazy_sum, lathe::lazy::metrics());
      row.lazy_calls++;
    }
  };
  auto new_inputs = [&](int i) {
    std::vector<Tensor> in = make_inputs(name, a.batch, 1000 + static_cast<uint64_t>(i));
    for (size_t k = 0; k < runners.size(); ++k) prepared[k] = runners[k].prepare(in);
  };
  if (a.blocked) {
    for (size_t k = 0; k < runners.size(); ++k) {
      runners[k].call(prepared[k]);
      for (int i = 0; i < a.repeat; ++i) {
        if (a.randomize_input) new_inputs(i);
        timed_call(k);
      }
    }
  } else {
    for (int i = 0; i < a.repeat; ++i) {
      if (a.randomize_input) new_inputs(i);
      for (size_t j = 0; j < runners.size(); ++j) timed_call((i + j) % runners.size());
    }
  }
  row.lazy = lazy_sum;
  for (auto& v : ms) row.ms.push_back(median(v));
  std::cerr << progress_line(row, runners, a, build_s) << std::endl;
  return row;
}

double geomean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += std::log(x);
  return v.empty() ? NAN : std::exp(s / static_cast<double>(v.size()));
}

// The performance table as CSV (--csv): one row per model and a geomean row; 1 if unwritable.
int write_csv(const Args& a, const std::vector<PerfRow>& rows,
              const std::vector<std::vector<double>>& speedups) {
  const auto& b = a.backends;
  std::ofstream csv(a.csv);
  if (!csv) {
    std::cerr << "lathe-bench: cannot write " << a.csv << "\n";
    return 1;
  }
  csv << "model,batch,threads,baseline";
  for (const auto& n : b) csv << "," << n << "_ms";
  for (size_t k = 1; k < b.size(); ++k) csv << "," << b[k] << "_speedup";
  csv << ",compile_s,lazy_compile_ms,lazy_ops_per_call,lazy_trace_ms,lazy_hash_ms,"
         "lazy_execute_ms\n";
  for (const PerfRow& r : rows) {
    csv << r.model << "," << a.batch << "," << lathe::num_threads() << "," << b[0];
    for (double x : r.ms) csv << "," << x;
    for (size_t k = 1; k < b.size(); ++k) csv << "," << r.ms[0] / r.ms[k];
    csv << "," << (std::isnan(r.compile_s) ? 0.0 : r.compile_s) << ","
        << (std::isnan(r.lazy_compile_s) ? 0.0 : r.lazy_compile_s * 1e3);
    const double n = r.lazy_calls > 0 ? static_cast<double>(r.lazy_calls) : NAN;
    csv << "," << r.lazy.ops_traced / n << "," << r.lazy.trace_s / n * 1e3 << ","
        << r.lazy.hash_s / n * 1e3 << "," << r.lazy.execute_s / n * 1e3 << "\n";
  }
  csv << "geomean,,,";
  for (size_t k = 0; k < b.size(); ++k) csv << ",";
  for (size_t k = 1; k < b.size(); ++k) csv << "," << geomean(speedups[k]);
  csv << ",,,,,,\n";
  return 0;
}

int run_performance(const Args& a, const std::vector<std::string>& names) {
  std::vector<PerfRow> rows;
  for (const auto& n : names) rows.push_back(bench_model(n, a));
  const auto& b = a.backends;  // b[0] is the baseline (parse() puts it first)
  const bool has_once = std::find(b.begin(), b.end(), "compile") != b.end();

  std::ostringstream md;
  md << "| model | " << b[0] << " ms |";
  for (size_t k = 1; k < b.size(); ++k) md << " " << b[k] << " |";
  if (has_once) md << " compile s |";
  md << "\n| --- | ---: |";
  for (size_t k = 1; k < b.size(); ++k) md << " ---: |";
  if (has_once) md << " ---: |";
  md << "\n";
  std::vector<std::vector<double>> speedups(b.size());
  char buf[64];
  for (const PerfRow& r : rows) {
    std::snprintf(buf, sizeof buf, "%.2f", r.ms[0]);
    md << "| " << r.model << " | " << buf << " |";
    for (size_t k = 1; k < b.size(); ++k) {
      const double s = r.ms[0] / r.ms[k];
      speedups[k].push_back(s);
      std::snprintf(buf, sizeof buf, "%.2fx", s);
      md << " " << buf << " |";
    }
    if (has_once) {
      std::snprintf(buf, sizeof buf, "%.2f", r.compile_s);
      md << " " << buf << " |";
    }
    md << "\n";
  }
  md << "| geomean | |";
  for (size_t k = 1; k < b.size(); ++k) {
    std::snprintf(buf, sizeof buf, "%.2fx", geomean(speedups[k]));
    md << " " << buf << " |";
  }
  if (has_once) md << " |";
  md << "\n";
  std::cout << "lathe-bench --performance --inference, batch " << a.batch << ", "
            << lathe::num_threads() << " threads, median of " << a.repeat
            << (a.blocked ? " back-to-back calls per backend" : " alternating calls")
            << "; speedup = " << b[0] << " ms / backend ms"
            << (a.trace_on_lazy ? " (model and inputs on the lazy device)" : "") << " ("
            << lathe::num_threads_reason() << ")\n\n"
            << md.str();
  // Ratios between two non-baseline backends (e.g. compile over eager with --trace-on-lazy).
  for (size_t k = 1; k < b.size(); ++k)
    for (size_t j = 1; j < b.size(); ++j)
      if (b[k] == "compile" && j != k) {
        std::vector<double> ratio;
        for (const PerfRow& r : rows) ratio.push_back(r.ms[j] / r.ms[k]);
        std::printf("\ngeomean compile over %s: %.2fx\n", b[j].c_str(), geomean(ratio));
      }

  return a.csv.empty() ? 0 : write_csv(a, rows, speedups);
}

// ---------------------------------------------------------------------------------------------
// Accuracy

struct AccError {
  double max_abs = 0, rmse = 0;
  bool allclose = true;
};

// Largest |value| over the reference outputs.
double scale_of(const std::vector<Tensor>& ref) {
  double m = 0;
  for (const Tensor& t : ref)
    for (double v : t.to_vector<double>()) m = std::max(m, std::abs(v));
  return m;
}

// allclose(out, ref) with rtol = tol and atol = tol * min(1, scale), scale being the largest
// |ref|: the usual allclose at `tol`, tightened for a model whose untrained outputs are tiny (a
// plain atol of 1e-4 would pass anything there), plus the RMSE against ref.
AccError compare(const std::vector<Tensor>& out, const std::vector<Tensor>& ref, double tol,
                 double scale) {
  AccError e;
  double sq = 0;
  size_t n = 0;
  if (out.size() != ref.size()) {
    e.allclose = false;
    e.max_abs = e.rmse = INFINITY;
    return e;
  }
  const double atol = tol * std::min(1.0, scale);
  for (size_t i = 0; i < out.size(); ++i) {
    Tensor o = out[i].device() == Device::lazy() ? out[i].to(Device::cpu()) : out[i];
    if (o.shape() != ref[i].shape()) {
      e.allclose = false;
      e.max_abs = e.rmse = INFINITY;
      return e;
    }
    std::vector<double> x = o.to_vector<double>(), y = ref[i].to_vector<double>();
    for (size_t j = 0; j < x.size(); ++j) {
      const double d = std::abs(x[j] - y[j]);
      if (!(d <= atol + tol * std::abs(y[j]))) e.allclose = false;
      if (!(d <= e.max_abs)) e.max_abs = std::isnan(d) ? INFINITY : d;
      sq += d * d;
    }
    n += x.size();
  }
  e.rmse = n ? std::sqrt(sq / static_cast<double>(n)) : 0;
  return e;
}

// The bf16 accuracy rule: a backend computing at bf16 precision passes when the RMSE of its
// outputs against the fp64 reference is at most this fraction of the largest |reference output|.
// The ten models' bf16 compiles give 0.09-0.24% (docs/benchmarks.md); a contraction accumulating
// in bf16 instead of f32 gives several percent, and a 10% error on every output (the bf16
// --inject-error self-test) fails it.
constexpr double kBf16RmseOfScale = 1e-2;

int run_accuracy(const Args& a, const std::vector<std::string>& names) {
  std::ostringstream md;
  md << "| model |";
  for (const auto& b : a.backends) md << " " << b << " |";
  md << "\n| --- |";
  for (size_t k = 0; k < a.backends.size(); ++k) md << " --- |";
  md << "\n";
  std::ofstream csv;
  if (!a.csv.empty()) {
    csv.open(a.csv);
    if (!csv) {
      std::cerr << "lathe-bench: cannot write " << a.csv << "\n";
      return 1;
    }
    csv << "model,batch,backend,status,max_abs_error,rmse,eager_rmse,tolerance\n";
  }
  int failures = 0;
  for (const auto& name : names) {
    const auto t0 = Clock::now();
    std::vector<Tensor> inputs = make_inputs(name, a.batch, 1);
    // fp64 reference: the same weights (same seed) converted, the same inputs converted.
    lathe::models::ModelOptions options;
    options.seed = 0;
    auto ref_model = lathe::models::create_model(name, options);
    ref_model->module->to(DType::f64);
    std::vector<Tensor> ref_in;
    for (const Tensor& t : inputs)
      ref_in.push_back(lathe::is_floating(t.dtype()) ? t.to(DType::f64) : t);
    std::vector<Tensor> ref = ref_model->forward(ref_in);
    ref_model.reset();
    const double scale = scale_of(ref);

    Models models = build_models(name, a);
    std::vector<Runner> runners = make_runners(models, a);
    // eager f32's own error against fp64 sets the RMSE allowance.
    auto eager_model = models.cpu ? models.cpu : lathe::models::create_model(name, options);
    const AccError eager_err = compare(eager_model->forward(inputs), ref, a.tolerance, scale);
    md << "| " << name << " |";
    std::ostringstream line;
    line << "[lathe-bench] " << name << " accuracy (fp64 reference, max |output| " << scale
         << ", tolerance " << a.tolerance << "):";
    for (const Runner& r : runners) {
      const bool bf16 = is_compile(r.name) && (bf16_suffix(r.name) || a.precision == DType::bf16);
      // Two calls: the first traces / compiles, the second replays.
      r.call(r.prepare(inputs));
      std::vector<Tensor> out = r.call(r.prepare(inputs));
      if (r.name == a.inject_error)  // proves the check can fail (a test runs it)
        for (Tensor& t : out) t = lathe::mul(t.to(Device::cpu()), bf16 ? 1.1 : 1.01);
      const AccError e = compare(out, ref, a.tolerance, scale);
      // bf16 (kBf16RmseOfScale): the RMSE within 1% of the largest |reference output|.
      const bool rmse_ok = bf16 ? e.rmse <= kBf16RmseOfScale * scale : e.rmse <= 2 * eager_err.rmse;
      const char* status = bf16         ? (rmse_ok ? "pass (bf16 rmse)" : "FAIL")
                           : e.allclose ? "pass"
                           : rmse_ok    ? "pass (rmse)"
                                        : "FAIL";
      if (bf16 ? !rmse_ok : !e.allclose && !rmse_ok) ++failures;
      md << " " << status << " |";
      char buf[200];
      std::snprintf(buf, sizeof buf, " %s %s (max abs err %.3g, rmse %.3g, eager rmse %.3g)",
                    r.name.c_str(), status, e.max_abs, e.rmse, eager_err.rmse);
      line << buf;
      if (csv) {
        csv << name << "," << a.batch << "," << r.name << "," << status << "," << e.max_abs << ","
            << e.rmse << "," << eager_err.rmse << "," << a.tolerance << "\n";
      }
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, " [%.1f s]", seconds_since(t0));
    std::cerr << line.str() << buf << std::endl;
    md << "\n";
  }
  std::cout << "lathe-bench --accuracy --inference, batch " << a.batch
            << ", fp64 eager reference; pass: allclose with rtol " << a.tolerance << " and atol "
            << a.tolerance
            << " x min(1, max |reference output|), or pass (rmse): RMSE within 2x eager-f32's;"
            << " bf16 compiles: RMSE within " << kBf16RmseOfScale << " x max |reference output|"
            << (a.trace_on_lazy ? " (model and inputs on the lazy device)" : "") << " ("
            << lathe::num_threads_reason() << ")\n\n"
            << md.str();
  if (failures > 0) {
    std::cout << "\n" << failures << " failure(s)\n";
    return 1;
  }
  return 0;
}

}  // namespace

// --ddp N without RANK set: starts N ranks of this same command through lathe-run (beside this
// program), on a free localhost port; each rank sees RANK and runs run_training_ddp.
int launch_ddp_ranks(int n, int argc, char** argv) {
  char self[4096];
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) {
    std::cerr << "lathe-bench: cannot find its own path to start the ranks\n";
    return 1;
  }
  self[len] = '\0';
  std::string dir(self);
  dir = dir.substr(0, dir.rfind('/'));
  const std::string run = dir + "/lathe-run";
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof addr;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &alen);
  ::close(fd);
  std::vector<std::string> args{run,
                                "--nproc-per-node",
                                std::to_string(n),
                                "--master-port",
                                std::to_string(ntohs(addr.sin_port)),
                                self};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  std::vector<char*> cargs;
  for (auto& s : args) cargs.push_back(s.data());
  cargs.push_back(nullptr);
  ::execv(run.c_str(), cargs.data());
  std::cerr << "lathe-bench: cannot run " << run << " (build the lathe-run target)\n";
  return 1;
}

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  if (a.ddp > 0 && std::getenv("RANK") == nullptr) return launch_ddp_ranks(a.ddp, argc, argv);
  if (a.threads > 0) lathe::set_num_threads(a.threads);
  std::vector<std::string> names = lathe::models::model_names();
  if (!a.only.empty()) names = {a.only};
  std::cerr << "[lathe-bench] " << (a.accuracy ? "accuracy" : "performance") << ", batch "
            << a.batch << ", " << lathe::num_threads() << " threads, backends";
  for (const auto& b : a.backends) std::cerr << " " << b;
  if (a.trace_on_lazy) std::cerr << ", trace on lazy";
  if (!a.accuracy) std::cerr << ", warmup " << a.warmup << ", repeat " << a.repeat;
  if (a.training) std::cerr << ", training";
  if (a.precision == DType::bf16) std::cerr << ", compile precision bf16";
  std::cerr << "\n[lathe-bench] " << lathe::num_threads_reason() << std::endl;
  if (a.training) {
    lathe_bench::TrainingOptions o;
    o.backends = a.backends;
    o.batch = a.batch;
    o.image_size = a.image_size;
    o.seq_len = a.seq_len;
    o.repeat = a.repeat;
    o.warmup = a.warmup;
    o.tolerance = a.tolerance;
    o.csv = a.csv;
    o.inject_error = a.inject_error;
    o.amp = a.precision == DType::bf16;
    if (o.amp && a.accuracy) {
      std::cerr << "lathe-bench: --accuracy --training --precision bf16 is not supported yet "
                   "(the training accuracy rule is f32's)\n";
      return 2;
    }
    try {
      if (a.ddp > 0) return lathe_bench::run_training_ddp(o, names);
      return a.accuracy ? lathe_bench::run_training_accuracy(o, names)
                        : lathe_bench::run_training_performance(o, names);
    } catch (const lathe::Error& e) {
      std::cerr << "lathe-bench: " << e.what() << "\n";
      return 1;
    }
  }
  // Inference: no graph for gradients (and compiled entries may freeze the weights).
  lathe::NoGradGuard no_grad;
  try {
    return a.accuracy ? run_accuracy(a, names) : run_performance(a, names);
  } catch (const lathe::Error& e) {
    std::cerr << "lathe-bench: " << e.what() << "\n";
    return 1;
  }
}
