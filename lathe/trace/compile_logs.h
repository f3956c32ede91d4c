// Compile logs (LATHE_LOGS=recompiles,guards,graph,passes,threads,graph_breaks): which topics are
// on, and the one place that writes them (the log sink, stderr by default, one message at a time).
#pragma once

#include <string>

namespace lathe {
struct CompileOptions;
}

namespace lathe::detail {

// kThreads is written by the cpu backend (an executable's thread-count changes); listed here so
// LATHE_LOGS=threads is a known topic.
enum class LogTopic : unsigned {
  kRecompiles = 1,
  kGuards = 2,
  kGraph = 4,
  kPasses = 8,
  kThreads = 16,
  kGraphBreaks = 32  // each new region of a function with graph breaks, once, with why it ends
};

// The topic bits of a comma list ("recompiles,graph", "all", "" for none); throws lathe::Error
// naming an unknown topic.
unsigned parse_log_topics(const std::string& topics);
// Replaces the process's topics (the process default options' `logs`, see compile_options.h).
void set_log_topics(unsigned topics);

// True when the topic is enabled for the process (default_compile_options().logs at first use,
// or set_compile_logs since).
bool log_enabled(LogTopic topic);
// True when the topic is enabled for the process or by the function's own options.logs.
bool log_enabled(LogTopic topic, const CompileOptions& options);
// Writes "[lathe.<topic>] <text>" to the log sink (set_compile_log_sink; stderr by default).
void log_message(LogTopic topic, const std::string& text);
// Writes "[lathe] warning: <text>" to the log sink, whatever the topics.
void log_warning(const std::string& text);
// Writes "[lathe.options] <text>" to the log sink (the options, once, under LATHE_LOGS).
void log_options(const std::string& text);

}  // namespace lathe::detail
