// Data-parallel training on Gloo, as processes on localhost: the TCP store in-process, then
// lathe_dist_worker (tests/distributed/worker/) started as 2-4 ranks for the collectives, DDP's
// equivalence with one process, a mismatched model, a killed and a stuck rank, and lathe-run.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lathe/base/error.h"
#include "lathe/distributed/dist_options.h"
#include "lathe/distributed/tcp_store.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

const std::string kWorker = std::string(LATHE_BINARY_DIR) + "/lathe_dist_worker";
const std::string kRun = std::string(LATHE_BINARY_DIR) + "/lathe-run";

// A port nothing listens on now (the kernel's pick for port 0).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

struct Proc {
  int status = -1;     // waitpid status; -1: killed at the deadline
  std::string output;  // stdout and stderr
  double seconds = 0;
  bool exited_ok() const { return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0; }
  int code() const { return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Starts each argv with its environment additions, waits for all (killing what is left at the
// deadline), returns each one's status and output.
std::vector<Proc> run_all(const std::vector<std::vector<std::string>>& argvs,
                          const std::vector<std::map<std::string, std::string>>& envs,
                          double deadline_s) {
  const fs::path dir =
      fs::temp_directory_path() / ("lathe_dist_" + std::to_string(::getpid()) + "_" +
                                   std::to_string(Clock::now().time_since_epoch().count()));
  fs::create_directories(dir);
  std::vector<pid_t> pids;
  std::vector<Proc> out(argvs.size());
  const auto t0 = Clock::now();
  for (size_t i = 0; i < argvs.size(); ++i) {
    const std::string log = (dir / (std::to_string(i) + ".log")).string();
    const pid_t pid = fork();
    if (pid == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      for (const auto& [k, v] : envs[i]) ::setenv(k.c_str(), v.c_str(), 1);
      std::vector<char*> args;
      for (const auto& a : argvs[i]) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      _exit(127);
    }
    pids.push_back(pid);
  }
  size_t left = pids.size();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (pids[i] <= 0) continue;
      int status = 0;
      if (::waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        out[i].status = status;
        out[i].seconds = std::chrono::duration<double>(Clock::now() - t0).count();
        pids[i] = -1;
        --left;
      }
    }
    if (left > 0 && std::chrono::duration<double>(Clock::now() - t0).count() > deadline_s) {
      for (pid_t& p : pids)
        if (p > 0) {
          ::kill(p, SIGKILL);
          ::waitpid(p, nullptr, 0);
          p = -1;
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (size_t i = 0; i < argvs.size(); ++i)
    out[i].output = slurp(dir / (std::to_string(i) + ".log"));
  fs::remove_all(dir);
  return out;
}

// n ranks of lathe_dist_worker with `args`, over the TCP store on a free port.
std::vector<Proc> run_ranks(int n, const std::vector<std::string>& args, double deadline_s = 120,
                            std::map<std::string, std::string> extra = {}) {
  const int port = free_port();
  std::vector<std::vector<std::string>> argvs;
  std::vector<std::map<std::string, std::string>> envs;
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> a{kWorker};
    a.insert(a.end(), args.begin(), args.end());
    argvs.push_back(a);
    auto env = extra;
    env["RANK"] = std::to_string(r);
    env["WORLD_SIZE"] = std::to_string(n);
    env["MASTER_ADDR"] = "127.0.0.1";
    env["MASTER_PORT"] = std::to_string(port);
    env["OMP_NUM_THREADS"] = "1";
    envs.push_back(env);
  }
  return run_all(argvs, envs, deadline_s);
}

std::string outputs(const std::vector<Proc>& ps) {
  std::string s;
  for (size_t i = 0; i < ps.size(); ++i)
    s += "--- rank " + std::to_string(i) + ":\n" + ps[i].output;
  return s;
}

TEST(TcpStore, SetGetWaitAddAcrossClients) {
  const int port = free_port();
  using lathe::distributed::TcpStore;
  TcpStore server("127.0.0.1", port, true, std::chrono::seconds(10));
  TcpStore client("127.0.0.1", port, false, std::chrono::seconds(10));
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    server.set("k", {'h', 'i'});
  });
  const std::vector<char> v = client.get("k");  // blocks until the other thread sets it
  later.join();
  EXPECT_EQ(std::string(v.begin(), v.end()), "hi");
  client.wait({"k"});
  EXPECT_EQ(client.add("n", 2), 2);
  EXPECT_EQ(server.add("n", 3), 5);
}

TEST(TcpStore, WaitTimesOutWithTheKeyNamed) {
  const int port = free_port();
  lathe::distributed::TcpStore s("127.0.0.1", port, true, std::chrono::seconds(10));
  try {
    s.wait({"never"}, std::chrono::milliseconds(200));
    FAIL() << "no timeout";
  } catch (const lathe::Error& e) {
    EXPECT_NE(std::string(e.what()).find("never"), std::string::npos) << e.what();
  }
}

TEST(TcpStore, NoServerIsAClearErrorWithinTheTimeout) {
  const int port = free_port();
  const auto t0 = Clock::now();
  try {
    lathe::distributed::TcpStore s("127.0.0.1", port, false, std::chrono::milliseconds(300));
    FAIL() << "connected to nothing";
  } catch (const lathe::Error& e) {
    EXPECT_NE(std::string(e.what()).find("MASTER_ADDR"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0);
}

TEST(ProcessGroupOptions, FromEnvironmentAndItsErrors) {
  ::setenv("RANK", "1", 1);
  ::setenv("WORLD_SIZE", "3", 1);
  ::setenv("MASTER_PORT", "12345", 1);
  auto o = lathe::distributed::ProcessGroupOptions::from_env();
  EXPECT_EQ(o.rank, 1);
  EXPECT_EQ(o.world_size, 3);
  EXPECT_EQ(o.master_port, 12345);
  ::setenv("RANK", "3", 1);
  EXPECT_THROW(lathe::distributed::ProcessGroupOptions::from_env(), lathe::Error);
  ::unsetenv("WORLD_SIZE");
  EXPECT_THROW(lathe::distributed::ProcessGroupOptions::from_env(), lathe::Error);
  ::unsetenv("RANK");
  ::unsetenv("MASTER_PORT");
  EXPECT_EQ(lathe::distributed::ProcessGroupOptions::from_env().world_size, 1);
}

TEST(Collectives, TwoAndFourRanks) {
  for (int n : {2, 4}) {
    const auto ps = run_ranks(n, {"collectives"});
    for (const Proc& p : ps) EXPECT_TRUE(p.exited_ok()) << outputs(ps);
  }
}

TEST(Collectives, SharedFolderRendezvous) {
  const fs::path dir = fs::temp_directory_path() / ("lathe_rdv_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto ps = run_ranks(2, {"collectives"}, 120, {{"LATHE_DIST_INIT_DIR", dir.string()}});
  fs::remove_all(dir);
  for (const Proc& p : ps) EXPECT_TRUE(p.exited_ok()) << outputs(ps);
}

// N ranks on B/N equal one process on B, after several steps.
void expect_ddp_equals_one_process(int n, const std::string& mode, const std::string& opt,
                                   int accum) {
  const auto ps = run_ranks(n, {"ddp", mode, opt, std::to_string(accum)});
  for (const Proc& p : ps) {
    EXPECT_TRUE(p.exited_ok()) << outputs(ps);
    EXPECT_NE(p.output.find("OK ddp"), std::string::npos) << outputs(ps);
  }
}

TEST(DistributedDataParallel, EagerSgdTwoRanksEqualsOneProcess) {
  expect_ddp_equals_one_process(2, "eager", "sgd", 1);
}
TEST(DistributedDataParallel, EagerAdamFourRanksEqualsOneProcess) {
  expect_ddp_equals_one_process(4, "eager", "adam", 1);
}
TEST(DistributedDataParallel, NoSyncAccumulationEqualsOneProcess) {
  expect_ddp_equals_one_process(2, "eager", "sgd", 2);
  expect_ddp_equals_one_process(2, "eager", "adam", 2);
}
TEST(DistributedDataParallel, CompiledStepEqualsOneProcess) {
  expect_ddp_equals_one_process(2, "compile", "sgd", 1);
  expect_ddp_equals_one_process(2, "compile", "adam", 2);
}

// The check can fail: ranks that never synchronize end with other parameters.
TEST(DistributedDataParallel, UnsyncedRanksFailTheCheck) {
  const auto ps = run_ranks(2, {"ddp", "unsynced", "sgd", "1"});
  for (const Proc& p : ps) {
    EXPECT_EQ(p.code(), 1) << outputs(ps);
    EXPECT_NE(p.output.find("FAIL parameters differ"), std::string::npos) << outputs(ps);
  }
}

// The eager backward starts all-reduces while it still has nodes to run.
TEST(DistributedDataParallel, AllReducesStartBeforeTheBackwardEnds) {
  const auto ps = run_ranks(2, {"ddp", "eager", "sgd", "1"});
  ASSERT_TRUE(ps[0].exited_ok()) << outputs(ps);
  const auto at = ps[0].output.find("started during backward ");
  ASSERT_NE(at, std::string::npos) << ps[0].output;
  const long during =
      std::atol(ps[0].output.c_str() + at + std::strlen("started during backward "));
  EXPECT_GT(during, 0) << ps[0].output;
  const auto bat = ps[0].output.find("bucket all-reduces ");
  const long total = std::atol(ps[0].output.c_str() + bat + std::strlen("bucket all-reduces "));
  EXPECT_LT(during, total) << "the last bucket (the first layer) cannot overlap: " << ps[0].output;
}

TEST(DistributedDataParallel, MismatchedModelsFailAtConstructionOnEveryRank) {
  const auto ps = run_ranks(2, {"mismatch"});
  for (const Proc& p : ps) {
    EXPECT_EQ(p.code(), 3) << outputs(ps);
    EXPECT_NE(p.output.find("the ranks hold different models"), std::string::npos) << outputs(ps);
    EXPECT_NE(p.output.find("rank 1 holds 8 parameters"), std::string::npos) << outputs(ps);
  }
}

TEST(ProcessGroup, AKilledRankFailsTheOthersWithinTheTimeout) {
  const auto ps = run_ranks(3, {"killed"}, 60, {{"LATHE_DIST_TIMEOUT", "10"}});
  EXPECT_TRUE(ps[1].status >= 0 && WIFSIGNALED(ps[1].status)) << outputs(ps);
  for (int r : {0, 2}) {
    EXPECT_EQ(ps[r].code(), 3) << outputs(ps);
    EXPECT_NE(ps[r].output.find("rank " + std::to_string(r) + " of 3: all_reduce"),
              std::string::npos)
        << outputs(ps);
    EXPECT_LT(ps[r].seconds, 40) << outputs(ps);
  }
}

TEST(ProcessGroup, AStuckRankTimesTheOthersOut) {
  const auto ps = run_ranks(2, {"stuck"}, 12, {{"LATHE_DIST_TIMEOUT", "3"}});
  EXPECT_EQ(ps[0].code(), 3) << outputs(ps);
  EXPECT_NE(ps[0].output.find("rank 0 of 2: all_reduce"), std::string::npos) << outputs(ps);
  EXPECT_NE(ps[0].output.find("LATHE_DIST_TIMEOUT"), std::string::npos) << outputs(ps);
  EXPECT_LT(ps[0].seconds, 11) << outputs(ps);
  EXPECT_EQ(ps[1].status, -1) << "rank 1 sleeps until killed: " << outputs(ps);
}

TEST(LatheRun, StartsTheRanksWithTheirEnvironment) {
  const auto ps = run_all({{kRun, "--nproc-per-node", "2", "--master-port",
                            std::to_string(free_port()), kWorker, "collectives"}},
                          {{}}, 120);
  EXPECT_TRUE(ps[0].exited_ok()) << ps[0].output;
  EXPECT_NE(ps[0].output.find("OK collectives rank 0 of 2"), std::string::npos) << ps[0].output;
  EXPECT_NE(ps[0].output.find("OK collectives rank 1 of 2"), std::string::npos) << ps[0].output;
}

TEST(LatheRun, NamesTheFailedRankAndExitsWithItsCode) {
  const auto ps = run_all({{kRun, "--nproc-per-node", "3", kWorker, "exit", "2"}}, {{}}, 60);
  EXPECT_EQ(ps[0].code(), 7) << ps[0].output;
  EXPECT_NE(ps[0].output.find("rank 2"), std::string::npos) << ps[0].output;
  EXPECT_NE(ps[0].output.find("exited with code 7"), std::string::npos) << ps[0].output;
}

TEST(LatheRun, BadArgumentsAreAUsageError) {
  const auto ps = run_all({{kRun, "--nproc-per-node", "zero", kWorker}}, {{}}, 30);
  EXPECT_EQ(ps[0].code(), 2) << ps[0].output;
  EXPECT_NE(ps[0].output.find("usage: lathe-run"), std::string::npos) << ps[0].output;
}

}  // namespace
