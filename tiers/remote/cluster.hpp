// SPDX-License-Identifier: Apache-2.0
// A Redis Cluster client for whole blocks: routes each key to the master that owns its slot
// (the slot table from CLUSTER SLOTS), pipelines the commands of a batch per server (every
// request of a server is sent before its replies are read, and the servers of a batch work at
// the same time), follows one -MOVED or -ASK redirection per command, and refreshes the table
// when the cluster changes (a redirection, a server that fails, a slot nobody serves).
//
// Every call ends by its deadline, done or failed. A server that refuses a connection or runs
// past a deadline is left alone for a short back-off, so a dead or hung master costs its slots
// an immediate miss rather than a connect attempt or a whole deadline per command.
// Thread-safe: connections are pooled per server and each call checks out what it uses.
#pragma once

#include "tiers/remote/conn.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

namespace cxltier::remote {

struct NodeAddr {
  std::string host;
  uint16_t port = 0;
  std::string str() const { return host + ":" + std::to_string(port); }
};
// "127.0.0.1:7000", "[::1]:7000", "redis-a.internal:6379". Throws Error(CXLT_ERROR_CONFIG) naming `what`.
NodeAddr parse_node_addr(const std::string &text, const std::string &what);

enum class OpStatus : uint8_t {
  pending,
  ok,          // SET acknowledged, or GET read in full (header and payload: the caller checks them)
  absent,      // GET: no such key
  wrong_size,  // GET: a value of another length (not ours, or another geometry): read and dropped
  refused,     // an error reply (-OOM, -CLUSTERDOWN, -LOADING, -READONLY, a second redirection, ...)
  timeout,     // the deadline passed
  failed,      // connection refused or lost, protocol error, no server for the slot
};
const char *op_status_name(OpStatus s) noexcept;

// One command of a batch: SET key (head + body) or GET key into (head, body).
struct Op {
  enum Kind : uint8_t { get, set } kind = get;
  std::string key;
  void *head = nullptr;  // SET: the value's first bytes (a header); GET: where they go
  size_t head_bytes = 0;
  void *body = nullptr;  // SET: the rest of the value (tier memory, not copied); GET: where it goes
  size_t body_bytes = 0;
  OpStatus status = OpStatus::pending;
  std::string error;     // the error reply or the failure, for messages
};

struct ClusterOptions {
  std::vector<NodeAddr> seeds;
  Auth auth;
  size_t max_idle_per_node = 8;                              // pooled connections kept per server
  std::chrono::milliseconds node_backoff{500};               // a server that failed is skipped this long
  std::chrono::milliseconds min_refresh_interval{100};       // table refreshes at most this often
};

struct ClusterCounters {
  std::atomic<uint64_t> moved{0}, ask{0}, refreshes{0}, connects{0}, timeouts{0};
};

class Cluster {
public:
  explicit Cluster(ClusterOptions opt);
  ~Cluster();
  Cluster(const Cluster &) = delete;
  Cluster &operator=(const Cluster &) = delete;

  // Run a batch by the deadline. Each op ends with a status other than pending.
  void execute(Op *ops, size_t n, Deadline dl);
  // Read the slot table now (CLUSTER SLOTS from a known server, else a seed). False with *err
  // when no server answered.
  bool refresh(Deadline dl, std::string *err);
  // Masters serving at least one slot, and slots served, in the current table.
  size_t masters() const;
  size_t slots_covered() const;
  // The server that owns `key`'s slot in the current table ("" if none).
  std::string owner_of(const std::string &key) const;
  const ClusterCounters &counters() const noexcept { return counters_; }

private:
  struct Node;
  struct Target;
  std::shared_ptr<Node> node_for(const NodeAddr &a);  // known or new (under table_mu_)
  std::shared_ptr<Node> route(uint16_t slot) const;
  std::unique_ptr<Conn> checkout(Node &n, Deadline dl, std::string *err);
  void checkin(Node &n, std::unique_ptr<Conn> c);
  void mark_down(Node &n);  // skip it for the back-off, and refresh the table
  void run_round(std::vector<Target> &targets, Deadline dl);
  void want_refresh() noexcept { refresh_wanted_.store(true, std::memory_order_relaxed); }
  void maybe_refresh(Deadline dl);

  ClusterOptions opt_;
  mutable std::shared_mutex table_mu_;
  std::vector<std::shared_ptr<Node>> nodes_;    // every server seen, never removed
  std::vector<int32_t> slot_node_;              // slot -> index in nodes_, -1: nobody
  std::mutex refresh_mu_;                       // one refresh at a time
  std::atomic<bool> refresh_wanted_{true};
  std::atomic<int64_t> last_refresh_ns_{0};
  ClusterCounters counters_;
};

}  // namespace cxltier::remote
