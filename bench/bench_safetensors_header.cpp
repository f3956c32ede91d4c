// Open time of safetensors files with many tensors (issue 15: open time used to grow with the
// square of the tensor count).
//   bench_safetensors_header [COUNT...]     (defaults: 10000 100000 1000000)
// For each count, writes a file of COUNT F32[1] tensors to the temp dir and prints the median of
// SafetensorsFile (parse and validate the header), load_safetensors (also one Tensor per entry)
// and, for context, a plain nlohmann DOM parse of the same header text. For counts up to 20,000
// it also times nlohmann's callback parser, which the loader used before (quadratic).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lathe/io/safetensors.h"

using Clock = std::chrono::steady_clock;

namespace {

template <class F>
double median_ms(F&& f, int reps) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto a = Clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// The header text of `count` F32[1] tensors named like a transformer's parameters.
std::string make_header(int64_t count) {
  std::string h = "{";
  for (int64_t i = 0; i < count; ++i) {
    h += i ? ",\"" : "\"";
    h += "model.layers." + std::to_string(i) + ".weight\":{\"dtype\":\"F32\",\"shape\":[1],";
    h += "\"data_offsets\":[" + std::to_string(4 * i) + "," + std::to_string(4 * i + 4) + "]}";
  }
  h += "}";
  h.append((8 - h.size() % 8) % 8, ' ');
  return h;
}

void write_file(const std::string& path, const std::string& header, int64_t count) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  uint64_t n = header.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f.write(header.data(), static_cast<std::streamsize>(n));
  std::string data(static_cast<size_t>(4 * count), '\0');
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> counts;
  for (int i = 1; i < argc; ++i) counts.push_back(std::stoll(argv[i]));
  if (counts.empty()) counts = {10'000, 100'000, 1'000'000};
  const std::string path =
      (std::filesystem::temp_directory_path() / "lathe_bench_header.safetensors").string();

  std::printf(
      "| tensors | header MB | SafetensorsFile ms | load_safetensors ms | "
      "ns per tensor (open) | nlohmann DOM parse ms | nlohmann callback parse ms |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- |\n");
  for (int64_t count : counts) {
    const std::string header = make_header(count);
    write_file(path, header, count);
    const int reps = count >= 1'000'000 ? 3 : 5;
    size_t keys = 0;
    double open_ms =
        median_ms([&] { keys = lathe::io::SafetensorsFile(path).keys().size(); }, reps);
    if (keys != static_cast<size_t>(count)) {
      std::fprintf(stderr, "expected %lld tensors, read %zu\n", static_cast<long long>(count),
                   keys);
      return 1;
    }
    double load_ms = median_ms([&] { lathe::io::load_safetensors(path); }, reps);
    size_t parsed = 0;  // used, so the parse cannot be optimized away
    double dom_ms = median_ms([&] { parsed += nlohmann::json::parse(header).size(); }, reps);
    std::string callback = "-";
    if (count <= 20'000) {
      auto keep_all = [](int, nlohmann::json::parse_event_t, nlohmann::json&) { return true; };
      double ms = median_ms([&] { parsed += nlohmann::json::parse(header, keep_all).size(); }, 1);
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.1f", ms);
      callback = buf;
    }
    std::printf("| %lld | %.1f | %.1f | %.1f | %.0f | %.1f | %s |\n", static_cast<long long>(count),
                header.size() / 1e6, open_ms, load_ms, open_ms * 1e6 / count, dom_ms,
                callback.c_str());
    std::fflush(stdout);
    if (parsed == 0) return 1;
  }
  std::filesystem::remove(path);
}
