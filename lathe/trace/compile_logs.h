// Compile logs (LATHE_LOGS=recompiles,guards,graph,passes): which topics are on, and the one place
// that writes them (the log sink, stderr by default, one message at a time).
#pragma once

#include <string>

namespace lathe::detail {

enum class LogTopic : unsigned { kRecompiles = 1, kGuards = 2, kGraph = 4, kPasses = 8 };

// True when the topic is enabled (LATHE_LOGS at first use, or set_compile_logs).
bool log_enabled(LogTopic topic);
// Writes "[lathe.<topic>] <text>" to the log sink (set_compile_log_sink; stderr by default).
void log_message(LogTopic topic, const std::string& text);
// Writes "[lathe] warning: <text>" to the log sink, whatever the topics.
void log_warning(const std::string& text);

}  // namespace lathe::detail
