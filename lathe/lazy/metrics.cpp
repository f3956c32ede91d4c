#include <sstream>

#include "lathe/lazy/lazy.h"

namespace lathe::lazy {

std::string Metrics::to_string() const {
  std::ostringstream os;
  auto line = [&](const char* name, auto v) { os << name << ": " << v << '\n'; };
  line("ops_traced", ops_traced);
  line("syncs", syncs);
  line("graphs_built", graphs_built);
  line("graph_nodes", graph_nodes);
  line("graph_hashes", graph_hashes);
  line("cache_hits", cache_hits);
  line("cache_misses", cache_misses);
  line("hash_collisions", hash_collisions);
  line("compiles", compiles);
  line("executions", executions);
  line("freezes", freezes);
  line("freezes_dropped", freezes_dropped);
  line("transfers_to_device", transfers_to_device);
  line("transfers_from_device", transfers_from_device);
  line("bytes_to_device", bytes_to_device);
  line("bytes_from_device", bytes_from_device);
  os.setf(std::ios::fixed);
  os.precision(6);
  line("trace_s", trace_s);
  line("hash_s", hash_s);
  line("compile_s", compile_s);
  line("execute_s", execute_s);
  return os.str();
}

}  // namespace lathe::lazy
