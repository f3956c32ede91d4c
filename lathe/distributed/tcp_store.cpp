#include "lathe/distributed/tcp_store.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "lathe/base/error.h"

namespace lathe::distributed {
namespace {

using Clock = std::chrono::steady_clock;
using detail::str;

// Requests: cmd, timeout in ms (i64), key count (u32), keys (u32 length, bytes), value (u32
// length, bytes). Replies: status (0 ok, 1 timed out), value.
constexpr char kSet = 's', kGet = 'g', kWait = 'w', kAdd = 'a';

int remaining_ms(Clock::time_point deadline) {
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return ms <= 0 ? 0 : static_cast<int>(std::min<int64_t>(ms, 1 << 30));
}

// Sends or receives exactly n bytes before the deadline; false on a closed peer or the deadline.
bool io_all(int fd, char* p, size_t n, bool send, Clock::time_point deadline) {
  while (n > 0) {
    pollfd pfd{fd, static_cast<short>(send ? POLLOUT : POLLIN), 0};
    const int r = ::poll(&pfd, 1, remaining_ms(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    const ssize_t k = send ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

struct Buffer {
  std::vector<char> bytes;
  void put(const void* p, size_t n) {
    bytes.insert(bytes.end(), static_cast<const char*>(p), static_cast<const char*>(p) + n);
  }
  void put_u32(uint32_t v) { put(&v, 4); }
  void put_blob(const std::string& s) {
    put_u32(static_cast<uint32_t>(s.size()));
    put(s.data(), s.size());
  }
  void put_blob(const std::vector<char>& s) {
    put_u32(static_cast<uint32_t>(s.size()));
    put(s.data(), s.size());
  }
};

// Reads a length-prefixed blob (a length over 1 GiB is a protocol error).
bool read_blob(int fd, std::vector<char>& out, Clock::time_point deadline) {
  uint32_t n = 0;
  if (!io_all(fd, reinterpret_cast<char*>(&n), 4, false, deadline) || n > (1u << 30)) return false;
  out.resize(n);
  return io_all(fd, out.data(), n, false, deadline);
}

}  // namespace

// The table and its connections: an accept thread and one thread per client.
class TcpStoreServer {
 public:
  explicit TcpStoreServer(int port) {
    listen_fd_ = ::socket(AF_INET6, SOCK_STREAM, 0);
    bool v6 = listen_fd_ >= 0;
    if (!v6) listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    LATHE_CHECK(listen_fd_ >= 0,
                "[distributed] TCP store: socket() failed: ", std::strerror(errno));
    const int one = 1, zero = 0;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc;
    if (v6) {
      ::setsockopt(listen_fd_, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      a.sin6_addr = in6addr_any;
      a.sin6_port = htons(static_cast<uint16_t>(port));
      rc = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    } else {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_ANY);
      a.sin_port = htons(static_cast<uint16_t>(port));
      rc = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    }
    if (rc != 0 || ::listen(listen_fd_, 128) != 0) {
      const int err = errno;
      ::close(listen_fd_);
      LATHE_CHECK(false, "[distributed] rank 0 cannot serve the rendezvous store on port ", port,
                  ": ", std::strerror(err),
                  " (another job on this port? set MASTER_PORT or lathe-run --master-port)");
    }
    accept_thread_ = std::thread([this] { accept_loop(); });
  }

  ~TcpStoreServer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      for (int fd : clients_) ::shutdown(fd, SHUT_RDWR);
    }
    cv_.notify_all();
    ::shutdown(listen_fd_, SHUT_RDWR);
    ::close(listen_fd_);
    if (accept_thread_.joinable()) accept_thread_.join();
    for (auto& t : threads_) t.join();
    for (int fd : clients_) ::close(fd);
  }

 private:
  void accept_loop() {
    for (;;) {
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      std::lock_guard<std::mutex> lock(mu_);
      if (fd < 0) {
        if (stopping_ || (errno != EINTR && errno != ECONNABORTED)) return;
        continue;
      }
      if (stopping_) {
        ::close(fd);
        return;
      }
      clients_.push_back(fd);
      threads_.emplace_back([this, fd] { serve(fd); });
    }
  }

  // One client's requests, until it closes the connection.
  void serve(int fd) {
    const auto forever = [] { return Clock::now() + std::chrono::hours(24 * 365); };
    for (;;) {
      char cmd = 0;
      int64_t timeout_ms = 0;
      uint32_t nkeys = 0;
      if (!io_all(fd, &cmd, 1, false, forever()) ||
          !io_all(fd, reinterpret_cast<char*>(&timeout_ms), 8, false, forever()) ||
          !io_all(fd, reinterpret_cast<char*>(&nkeys), 4, false, forever()) || nkeys > 4096)
        return;
      std::vector<std::string> keys(nkeys);
      std::vector<char> blob;
      for (auto& k : keys) {
        if (!read_blob(fd, blob, forever())) return;
        k.assign(blob.begin(), blob.end());
      }
      std::vector<char> value;
      if (!read_blob(fd, value, forever())) return;
      char status = 0;
      std::vector<char> reply;
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (cmd == kSet && !keys.empty()) {
          table_[keys[0]] = value;
          cv_.notify_all();
        } else if (cmd == kAdd && !keys.empty()) {
          int64_t delta = 0, cur = 0;
          std::memcpy(&delta, value.data(), std::min<size_t>(8, value.size()));
          auto it = table_.find(keys[0]);
          if (it != table_.end()) std::memcpy(&cur, it->second.data(), 8);
          cur += delta;
          std::vector<char> out(8);
          std::memcpy(out.data(), &cur, 8);
          table_[keys[0]] = out;
          reply = out;
          cv_.notify_all();
        } else if (cmd == kGet || cmd == kWait) {
          const auto all_set = [&] {
            if (stopping_) return true;
            for (const auto& k : keys)
              if (!table_.count(k)) return false;
            return true;
          };
          if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), all_set) || stopping_)
            status = 1;
          else if (cmd == kGet && !keys.empty())
            reply = table_[keys[0]];
        }
      }
      Buffer b;
      b.put(&status, 1);
      b.put_blob(reply);
      if (!io_all(fd, b.bytes.data(), b.bytes.size(), true, forever())) return;
    }
  }

  int listen_fd_ = -1;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<char>> table_;
  std::vector<int> clients_;
  std::vector<std::thread> threads_;
  std::thread accept_thread_;
  bool stopping_ = false;
};

TcpStore::TcpStore(const std::string& host, int port, bool is_server,
                   std::chrono::milliseconds timeout)
    : where_(str(host, ":", port)), timeout_(timeout) {
  LATHE_CHECK(port > 0 && port < 65536, "[distributed] the master port must be in 1..65535, got ",
              port);
  if (is_server) server_ = std::make_unique<TcpStoreServer>(port);
  const auto deadline = Clock::now() + timeout;
  std::string last_error = "no address";
  while (fd_ < 0) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    const int gai = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (gai != 0) {
      last_error = ::gai_strerror(gai);
    } else {
      for (addrinfo* a = res; a && fd_ < 0; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) continue;
        if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
          const int one = 1;
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          fd_ = fd;
        } else {
          last_error = std::strerror(errno);
          ::close(fd);
        }
      }
      ::freeaddrinfo(res);
    }
    if (fd_ >= 0) break;
    LATHE_CHECK(Clock::now() < deadline, "[distributed] cannot reach the rendezvous store at ",
                where_, " (rank 0 serves it) within ", timeout.count() / 1000.0, " s: ", last_error,
                "; check MASTER_ADDR / MASTER_PORT and that rank 0 is running");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
  server_.reset();
}

std::vector<char> TcpStore::request(char cmd, const std::vector<std::string>& keys,
                                    const std::vector<char>& value,
                                    std::chrono::milliseconds timeout) {
  Buffer b;
  b.put(&cmd, 1);
  const int64_t ms = timeout.count();
  b.put(&ms, 8);
  b.put_u32(static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) b.put_blob(k);
  b.put_blob(value);
  // The server answers a wait within `timeout`; the connection gets a few seconds more.
  const auto deadline = Clock::now() + timeout + std::chrono::seconds(5);
  char status = 0;
  std::vector<char> reply;
  const bool ok = io_all(fd_, b.bytes.data(), b.bytes.size(), true, deadline) &&
                  io_all(fd_, &status, 1, false, deadline) && read_blob(fd_, reply, deadline);
  LATHE_CHECK(ok, "[distributed] the rendezvous store at ", where_,
              " stopped answering (rank 0 exited?)");
  if (status != 0) {
    std::string names;
    for (const auto& k : keys) names += (names.empty() ? "" : ", ") + k;
    LATHE_CHECK(false, "[distributed] timed out after ", timeout.count() / 1000.0,
                " s waiting for the rendezvous keys ", names, " at ", where_,
                " (a rank did not start or did not reach this point)");
  }
  return reply;
}

void TcpStore::set(const std::string& key, const std::vector<char>& data) {
  request(kSet, {key}, data, timeout_);
}

std::vector<char> TcpStore::get(const std::string& key) {
  return request(kGet, {key}, {}, timeout_);
}

void TcpStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void TcpStore::wait(const std::vector<std::string>& keys,
                    const std::chrono::milliseconds& timeout) {
  request(kWait, keys, {}, timeout);
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  std::vector<char> v(8);
  std::memcpy(v.data(), &delta, 8);
  const std::vector<char> r = request(kAdd, {key}, v, timeout_);
  int64_t out = 0;
  std::memcpy(&out, r.data(), std::min<size_t>(8, r.size()));
  return out;
}

}  // namespace lathe::distributed
