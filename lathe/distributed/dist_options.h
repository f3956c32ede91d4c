// How a process joins its process group: the environment torchrun and lathe-run set, read once
// here (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK, and Lathe's own LATHE_DIST_*).
#pragma once
#include <chrono>
#include <string>

namespace lathe::distributed {

struct ProcessGroupOptions {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  // TCP rendezvous: rank 0 serves the store on master_addr:master_port.
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // Shared-folder rendezvous instead (a folder every rank can read and write, e.g. on NFS; each
  // job its own): Gloo's FileStore; empty: TCP. LATHE_DIST_INIT_DIR.
  std::string init_dir;
  // The address the other ranks reach this rank's Gloo transport on; empty: the loopback address
  // when master_addr is local, else this machine's host name. LATHE_DIST_HOSTNAME.
  std::string hostname;
  // Every collective and the rendezvous fail after this long (a dead or stuck rank). PyTorch's
  // default is 30 min; 5 min here. LATHE_DIST_TIMEOUT (seconds).
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};

  // From the environment; throws a clear error for a malformed or inconsistent one (RANK set
  // without WORLD_SIZE, RANK >= WORLD_SIZE, a port that is not a number).
  static ProcessGroupOptions from_env();
  // "rank 1 of 2, tcp 127.0.0.1:29500, timeout 300 s"
  std::string to_string() const;
};

}  // namespace lathe::distributed
