#include "lathe/trace/compile_logs.h"

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <sstream>

#include "lathe/core/error.h"
#include "lathe/trace/compile.h"

namespace lathe {
namespace detail {
namespace {

unsigned parse_topics(const std::string& s) {
  unsigned flags = 0;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == "recompiles")
      flags |= unsigned(LogTopic::kRecompiles);
    else if (item == "guards")
      flags |= unsigned(LogTopic::kGuards);
    else if (item == "graph")
      flags |= unsigned(LogTopic::kGraph);
    else if (item == "passes")  // also read by the cpu backend (lathe/backend/cpu/cpu_backend.cpp)
      flags |= unsigned(LogTopic::kPasses);
    else if (item == "all")
      flags |= 15u;
    else if (!item.empty())
      throw Error(
          str("[compile] unknown log topic '", item, "' (known: recompiles, guards, graph, passes, all)"));
  }
  return flags;
}

std::atomic<unsigned>& flags() {
  static std::atomic<unsigned> f = [] {
    const char* env = std::getenv("LATHE_LOGS");
    try {
      return env ? parse_topics(env) : 0u;
    } catch (const Error& e) {
      log_warning(str(e.what(), " in LATHE_LOGS; ignored"));
      return 0u;
    }
  }();
  return f;
}

const char* topic_name(LogTopic t) {
  switch (t) {
    case LogTopic::kRecompiles:
      return "recompiles";
    case LogTopic::kGuards:
      return "guards";
    case LogTopic::kGraph:
      return "graph";
    case LogTopic::kPasses:
      return "passes";
  }
  return "?";
}

}  // namespace

bool log_enabled(LogTopic topic) {
  return (flags().load(std::memory_order_relaxed) & unsigned(topic)) != 0;
}

namespace {

std::mutex& sink_mutex() {
  static std::mutex mu;
  return mu;
}

CompileLogSink& sink() {  // guarded by sink_mutex()
  static CompileLogSink s;
  return s;
}

void emit(std::string message) {
  while (!message.empty() && message.back() == '\n') message.pop_back();
  std::lock_guard<std::mutex> lock(sink_mutex());
  if (sink()) {
    sink()(message);
    return;
  }
  std::cerr << message << '\n';
  std::cerr.flush();
}

}  // namespace

void log_message(LogTopic topic, const std::string& text) {
  emit(str("[lathe.", topic_name(topic), "] ", text));
}

void log_warning(const std::string& text) { emit("[lathe] warning: " + text); }

}  // namespace detail

void set_compile_logs(const std::string& topics) {
  detail::flags().store(detail::parse_topics(topics), std::memory_order_relaxed);
}

CompileLogSink set_compile_log_sink(CompileLogSink sink) {
  std::lock_guard<std::mutex> lock(detail::sink_mutex());
  std::swap(detail::sink(), sink);
  return sink;
}

}  // namespace lathe
