// The TCP rendezvous store (what torchrun's MASTER_ADDR / MASTER_PORT name): rank 0 serves a
// key-value table on the master port, every rank (rank 0 too) is a client. Gloo's rendezvous
// exchanges each pair's addresses through it; Lathe's process group also uses it to check that
// the ranks agree before the first collective. Debian's Gloo has file, hash and Redis stores,
// no TCP one; this is that store, behind Gloo's Store interface.
#pragma once
#include <gloo/rendezvous/store.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace lathe::distributed {

class TcpStoreServer;

class TcpStore : public gloo::rendezvous::Store {
 public:
  // is_server: this process serves the table (rank 0) on host:port (it binds every interface);
  // every process then connects to host:port, retrying until `timeout` (the server may start
  // later than a client).
  TcpStore(const std::string& host, int port, bool is_server, std::chrono::milliseconds timeout);
  ~TcpStore() override;
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  void set(const std::string& key, const std::vector<char>& data) override;
  // Blocks until the key is set (up to the timeout).
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;
  // Adds `delta` to the integer stored at key (0 when unset) and returns the new value.
  int64_t add(const std::string& key, int64_t delta);

 private:
  std::vector<char> request(char cmd, const std::vector<std::string>& keys,
                            const std::vector<char>& value, std::chrono::milliseconds timeout);
  std::unique_ptr<TcpStoreServer> server_;
  int fd_ = -1;
  std::string where_;  // "host:port", for errors
  std::chrono::milliseconds timeout_;
};

}  // namespace lathe::distributed
