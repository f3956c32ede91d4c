// lathe-run: starts the ranks of a data-parallel job on this machine, as torchrun does.
//
//   lathe-run --nproc-per-node N [--nnodes M --node-rank R --master-addr A --master-port P]
//             program [args...]
//
// Each rank is `program args...` with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR and MASTER_PORT set (lathe::distributed::init_process_group() reads them), and
// OMP_NUM_THREADS = this machine's cores / N when it is unset (N ranks share the cores).
// SIGINT and SIGTERM are forwarded to every rank. When one rank fails (a non-zero exit or a
// signal), lathe-run names it, stops the others (SIGTERM, then SIGKILL after 10 s) and exits
// with its status; it exits 0 when every rank does.
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

volatile sig_atomic_t forwarded_signal = 0;
void on_signal(int sig) { forwarded_signal = sig; }

int usage(const char* why) {
  std::fprintf(stderr,
               "lathe-run: %s\n"
               "usage: lathe-run --nproc-per-node N [--nnodes M] [--node-rank R] "
               "[--master-addr ADDR] [--master-port PORT] program [args...]\n",
               why);
  return 2;
}

bool parse_int(const char* s, int lo, int hi, int* out) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (!end || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

int cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

std::string describe(int status) {
  char buf[64];
  if (WIFEXITED(status))
    std::snprintf(buf, sizeof buf, "exited with code %d", WEXITSTATUS(status));
  else if (WIFSIGNALED(status))
    std::snprintf(buf, sizeof buf, "was killed by signal %d (%s)", WTERMSIG(status),
                  strsignal(WTERMSIG(status)));
  else
    std::snprintf(buf, sizeof buf, "ended with status %d", status);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  int nproc = 0, nnodes = 1, node_rank = 0, port = 29500;
  std::string addr = "127.0.0.1";
  int i = 1;
  for (; i < argc && std::strncmp(argv[i], "--", 2) == 0; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "--help" || a == "-h") {
      usage("starts N ranks of a data-parallel program");
      return 0;
    }
    if (i + 1 >= argc) return usage(("missing the value of " + a).c_str());
    const char* v = argv[++i];
    bool ok = true;
    if (a == "--nproc-per-node")
      ok = parse_int(v, 1, 4096, &nproc);
    else if (a == "--nnodes")
      ok = parse_int(v, 1, 1 << 16, &nnodes);
    else if (a == "--node-rank")
      ok = parse_int(v, 0, 1 << 16, &node_rank);
    else if (a == "--master-port")
      ok = parse_int(v, 1, 65535, &port);
    else if (a == "--master-addr")
      addr = v;
    else
      return usage(("unknown option " + a).c_str());
    if (!ok) return usage(("bad value for " + a + ": " + v).c_str());
  }
  if (nproc == 0) return usage("--nproc-per-node is required");
  if (node_rank >= nnodes) return usage("--node-rank must be below --nnodes");
  if (i >= argc) return usage("no program to run");
  const int world = nproc * nnodes;
  const bool set_threads = std::getenv("OMP_NUM_THREADS") == nullptr;
  const int threads = std::max(1, cores() / nproc);
  std::fprintf(stderr, "[lathe-run] %d rank(s) here (ranks %d..%d of %d), master %s:%d%s\n", nproc,
               node_rank * nproc, node_rank * nproc + nproc - 1, world, addr.c_str(), port,
               set_threads ? (", OMP_NUM_THREADS=" + std::to_string(threads)).c_str() : "");

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::vector<pid_t> pids(nproc, -1);
  for (int local = 0; local < nproc; ++local) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("[lathe-run] fork");
      for (pid_t p : pids)
        if (p > 0) kill(p, SIGKILL);
      return 1;
    }
    if (pid == 0) {
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      setenv("RANK", std::to_string(node_rank * nproc + local).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(local).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      setenv("MASTER_ADDR", addr.c_str(), 1);
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      if (set_threads) setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);
      execvp(argv[i], argv + i);
      std::fprintf(stderr, "[lathe-run] cannot run %s: %s\n", argv[i], std::strerror(errno));
      _exit(127);
    }
    pids[local] = pid;
  }

  int alive = nproc, result = 0;
  bool stopping = false;
  auto stop_all = [&](int sig) {
    for (pid_t p : pids)
      if (p > 0) kill(p, sig);
  };
  auto kill_deadline = std::chrono::steady_clock::time_point::max();
  while (alive > 0) {
    if (forwarded_signal != 0) {
      const int sig = forwarded_signal;
      forwarded_signal = 0;
      std::fprintf(stderr, "[lathe-run] forwarding signal %d to the ranks\n", sig);
      stop_all(sig);
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      int local = 0;
      while (local < nproc && pids[local] != pid) ++local;
      if (local == nproc) continue;
      pids[local] = -1;
      --alive;
      const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      if (failed && !stopping) {
        std::fprintf(stderr, "[lathe-run] rank %d (pid %d) %s; stopping the other ranks\n",
                     node_rank * nproc + local, static_cast<int>(pid), describe(status).c_str());
        result = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        stopping = true;
        stop_all(SIGTERM);
        kill_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      }
      continue;
    }
    if (pid < 0 && errno == ECHILD) break;
    if (stopping && std::chrono::steady_clock::now() > kill_deadline) {
      stop_all(SIGKILL);
      kill_deadline = std::chrono::steady_clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return result;
}
