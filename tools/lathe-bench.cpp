// lathe-bench: eager inference latency of the benchmark models.
//
//   lathe-bench [--only NAME] [--batch-size N] [--repeat N] [--warmup N] [--threads N]
//
// Prints a markdown table `| model | batch | lathe eager ms |` (median over --repeat timed calls
// after --warmup untimed ones) on stdout and one progress line per model on stderr. Images are
// converted to channels-last before timing (convolutions run best in NHWC); bert runs at
// sequence length 128, vit is vit_base_patch16_224 at 224x224.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "lathe/core/threads.h"
#include "lathe/models/registry.h"

namespace {

struct Args {
  std::string only;
  int64_t batch = 1;
  int repeat = 30;
  int warmup = 3;
  int threads = 0;  // 0: leave lathe's default
};

[[noreturn]] void usage(const std::string& error) {
  if (!error.empty()) std::cerr << "lathe-bench: " << error << "\n";
  std::cerr << "usage: lathe-bench [--only NAME] [--batch-size N] [--repeat N] [--warmup N] "
               "[--threads N]\nmodels:";
  for (const auto& n : lathe::models::model_names()) std::cerr << " " << n;
  std::cerr << "\n";
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

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (f == "--help" || f == "-h") usage("");
    if (f == "--only") {
      if (v == nullptr) usage("--only needs a model name");
      a.only = v;
    } else if (f == "--batch-size") {
      a.batch = parse_int(f, v, 1);
    } else if (f == "--repeat") {
      a.repeat = static_cast<int>(parse_int(f, v, 1));
    } else if (f == "--warmup") {
      a.warmup = static_cast<int>(parse_int(f, v, 0));
    } else if (f == "--threads") {
      a.threads = static_cast<int>(parse_int(f, v, 1));
    } else {
      usage("unknown argument '" + f + "'");
    }
    ++i;
  }
  return a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median milliseconds of one eager forward of `name`.
double bench_model(const std::string& name, const Args& a) {
  lathe::models::ModelOptions options;
  options.seed = 0;
  auto spec = lathe::models::create_model(name, options);
  std::vector<lathe::Tensor> inputs = lathe::models::default_inputs(name, a.batch, 0);
  for (auto& t : inputs)
    if (t.dim() == 4 && lathe::is_floating(t.dtype())) t = t.to_channels_last();
  for (int i = 0; i < a.warmup; ++i) spec->forward(inputs);
  std::vector<double> ms;
  for (int i = 0; i < a.repeat; ++i) {
    auto start = std::chrono::steady_clock::now();
    std::vector<lathe::Tensor> out = spec->forward(inputs);
    auto stop = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
  }
  double med = median(ms);
  std::fprintf(
      stderr, "[lathe-bench] %s batch %lld: median %.2f ms, min %.2f, max %.2f (%d runs)\n",
      name.c_str(), static_cast<long long>(a.batch), med, *std::min_element(ms.begin(), ms.end()),
      *std::max_element(ms.begin(), ms.end()), a.repeat);
  return med;
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  if (a.threads > 0) lathe::set_num_threads(a.threads);
  std::vector<std::string> names = lathe::models::model_names();
  if (!a.only.empty()) names = {a.only};
  std::fprintf(stderr, "[lathe-bench] %d threads, warmup %d, repeat %d\n", lathe::num_threads(),
               a.warmup, a.repeat);
  std::vector<std::pair<std::string, double>> rows;
  try {
    for (const auto& n : names) rows.emplace_back(n, bench_model(n, a));
  } catch (const lathe::Error& e) {
    std::cerr << "lathe-bench: " << e.what() << "\n";
    return 1;
  }
  std::printf("| model | batch | lathe eager ms |\n| --- | --- | --- |\n");
  for (const auto& [n, ms] : rows)
    std::printf("| %s | %lld | %.2f |\n", n.c_str(), static_cast<long long>(a.batch), ms);
  return 0;
}
