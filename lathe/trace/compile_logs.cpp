#include "lathe/trace/compile_logs.h"

#include <atomic>
#include <iostream>
#include <mutex>
#include <sstream>

#include "lathe/core/error.h"
#include "lathe/trace/compile.h"

namespace lathe {
namespace detail {

unsigned parse_log_topics(const std::string& s) {
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
    else if (item ==
             "threads")  // written by the cpu backend (lathe/backend/cpu/adaptive_threads.cpp)
      flags |= unsigned(LogTopic::kThreads);
    else if (item == "graph_breaks")
      flags |= unsigned(LogTopic::kGraphBreaks);
    else if (item == "all")
      flags |= 63u;
    else if (!item.empty())
      throw Error(str("[compile] unknown log topic '", item,
                      "' (known: recompiles, guards, graph, passes, threads, graph_breaks, all)"));
  }
  return flags;
}

namespace {

// The process default's topics (its logs were checked when it was made).
std::atomic<unsigned>& flags() {
  static std::atomic<unsigned> f{parse_log_topics(default_compile_options().logs)};
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
    case LogTopic::kThreads:
      return "threads";
    case LogTopic::kGraphBreaks:
      return "graph_breaks";
  }
  return "?";
}

}  // namespace

void set_log_topics(unsigned topics) { flags().store(topics, std::memory_order_relaxed); }

bool log_enabled(LogTopic topic) {
  return (flags().load(std::memory_order_relaxed) & unsigned(topic)) != 0;
}

bool log_enabled(LogTopic topic, const CompileOptions& options) {
  if (log_enabled(topic)) return true;
  return !options.logs.empty() && (parse_log_topics(options.logs) & unsigned(topic)) != 0;
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

void log_options(const std::string& text) { emit("[lathe.options] " + text); }

}  // namespace detail

void set_compile_logs(const std::string& topics) {
  CompileOptions o = default_compile_options();
  o.logs = topics;
  set_default_compile_options(std::move(o));
}

CompileLogSink set_compile_log_sink(CompileLogSink sink) {
  std::lock_guard<std::mutex> lock(detail::sink_mutex());
  std::swap(detail::sink(), sink);
  return sink;
}

}  // namespace lathe
