// CoreOptions: the switches of lathe/core in one typed struct. The environment switch
// (LATHE_NUM_THREADS) is read once, by core_options_from_env, into the process default; code
// replaces it with set_core_options (or sets the thread count alone with set_num_threads,
// lathe/core/threads.h).
#pragma once

#include <string>

namespace lathe {

struct CoreOptions {
  // Threads for Lathe's parallel loops and oneDNN (applied to OpenMP); 0: the process's CPU
  // share (lathe/core/cpu_share.h).
  int num_threads = 0;

  // One line: every field as name=value.
  std::string to_string() const;
};

// The options the environment asks for now (reads it on each call; the process default reads
// it once): LATHE_NUM_THREADS, a positive integer (unset: 0, the CPU share). Throws lathe::Error
// for anything else. The one place in lathe/core that reads LATHE_* variables.
CoreOptions core_options_from_env();

// The process default: core_options_from_env() at first use, or what set_core_options (or
// set_num_threads) stored since. Thread safe.
CoreOptions core_options();
// Replaces the process default and applies it: the thread count becomes options.num_threads
// (0: the CPU share). Throws lathe::Error for a negative count.
void set_core_options(CoreOptions options);

}  // namespace lathe
