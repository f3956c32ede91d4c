#include "lathe/distributed/dist_options.h"

#include <cstdlib>
#include <string>

#include "lathe/base/error.h"

namespace lathe::distributed {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

long env_int(const char* name, long fallback, long lo, long hi) {
  const char* v = env(name);
  if (!v) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  LATHE_CHECK(end && *end == '\0' && x >= lo && x <= hi, "[distributed] ", name, "=", v,
              " is not an integer in ", lo, "..", hi);
  return x;
}

}  // namespace

ProcessGroupOptions ProcessGroupOptions::from_env() {
  ProcessGroupOptions o;
  const bool has_rank = env("RANK") != nullptr, has_world = env("WORLD_SIZE") != nullptr;
  LATHE_CHECK(has_rank == has_world, "[distributed] RANK and WORLD_SIZE must be set together (",
              has_rank ? "RANK" : "WORLD_SIZE",
              " is set, the other is not); start the ranks with lathe-run or torchrun");
  o.world_size = static_cast<int>(env_int("WORLD_SIZE", 1, 1, 1 << 20));
  o.rank = static_cast<int>(env_int("RANK", 0, 0, 1 << 20));
  LATHE_CHECK(o.rank < o.world_size, "[distributed] RANK=", o.rank,
              " is not below WORLD_SIZE=", o.world_size);
  o.local_rank = static_cast<int>(env_int("LOCAL_RANK", 0, 0, 1 << 20));
  if (const char* a = env("MASTER_ADDR")) o.master_addr = a;
  o.master_port = static_cast<int>(env_int("MASTER_PORT", o.master_port, 1, 65535));
  if (const char* f = env("LATHE_DIST_INIT_DIR")) o.init_dir = f;
  if (const char* h = env("LATHE_DIST_HOSTNAME")) o.hostname = h;
  o.timeout = std::chrono::seconds(env_int("LATHE_DIST_TIMEOUT", 300, 1, 86400 * 7));
  return o;
}

std::string ProcessGroupOptions::to_string() const {
  return detail::str(
      "rank ", rank, " of ", world_size, ", ",
      init_dir.empty() ? detail::str("tcp ", master_addr, ":", master_port) : "folder " + init_dir,
      ", timeout ", timeout.count() / 1000.0, " s");
}

}  // namespace lathe::distributed
