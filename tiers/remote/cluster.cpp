// SPDX-License-Identifier: Apache-2.0
// The Redis Cluster client (cluster.hpp): slot routing, per-server pipelines, one redirection,
// slot-table refresh, connection pools with a back-off for servers that fail.
#include "tiers/remote/cluster.hpp"

#include "tiers/remote/slot.hpp"

#include <cxltier/error.hpp>

#include <algorithm>
#include <charconv>
#include <sys/uio.h>

namespace cxltier::remote {

const char *op_status_name(OpStatus s) noexcept {
  switch (s) {
    case OpStatus::pending: return "pending";
    case OpStatus::ok: return "ok";
    case OpStatus::absent: return "absent";
    case OpStatus::wrong_size: return "wrong size";
    case OpStatus::refused: return "refused";
    case OpStatus::timeout: return "timed out";
    case OpStatus::failed: return "failed";
  }
  return "?";
}

NodeAddr parse_node_addr(const std::string &text, const std::string &what) {
  std::string t = text;
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.erase(0, 1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.pop_back();
  size_t colon = t.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == t.size())
    fail(CXLT_ERROR_CONFIG, what, ": '", text, "' is not HOST:PORT (e.g. 127.0.0.1:7000)");
  NodeAddr a;
  a.host = t.substr(0, colon);
  if (a.host.size() > 2 && a.host.front() == '[' && a.host.back() == ']') a.host = a.host.substr(1, a.host.size() - 2);
  unsigned port = 0;
  const char *b = t.data() + colon + 1, *e = t.data() + t.size();
  auto [p, ec] = std::from_chars(b, e, port);
  if (ec != std::errc() || p != e || port == 0 || port > 65535)
    fail(CXLT_ERROR_CONFIG, what, ": '", text, "' has no valid port (1-65535)");
  a.port = static_cast<uint16_t>(port);
  return a;
}

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

OpStatus status_of(Io io) { return io == Io::timeout ? OpStatus::timeout : OpStatus::failed; }

// "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381" -> the address ("" host: the sender's).
bool parse_redirect(const std::string &msg, size_t skip, const std::string &sender_host, NodeAddr *to) {
  size_t sp = msg.find(' ', skip);
  if (sp == std::string::npos) return false;
  std::string addr = msg.substr(sp + 1);
  size_t colon = addr.rfind(':');
  if (colon == std::string::npos) return false;
  unsigned port = 0;
  auto [p, ec] = std::from_chars(addr.data() + colon + 1, addr.data() + addr.size(), port);
  if (ec != std::errc() || port == 0 || port > 65535) return false;
  to->host = colon == 0 ? sender_host : addr.substr(0, colon);
  to->port = static_cast<uint16_t>(port);
  return true;
}

const char kCrlf[2] = {'\r', '\n'};
const std::string kAsking = resp_command({"ASKING"});

}  // namespace

struct Cluster::Node {
  NodeAddr addr;
  std::mutex mu;
  std::vector<std::unique_ptr<Conn>> idle;
  std::atomic<int64_t> down_until_ns{0};
};

// The commands of one round that go to one server.
struct Cluster::Target {
  std::shared_ptr<Node> node;
  std::vector<Op *> ops;
  std::vector<uint8_t> asking;  // send ASKING before ops[i]
  std::unique_ptr<Conn> conn;
  std::vector<std::string> prefixes;
  struct Redirect {
    Op *op;
    NodeAddr to;
    bool ask;
  };
};

Cluster::Cluster(ClusterOptions opt) : opt_(std::move(opt)), slot_node_(kSlots, -1) {
  std::unique_lock lk(table_mu_);
  for (const NodeAddr &s : opt_.seeds) {
    bool known = false;
    for (auto &n : nodes_) known = known || (n->addr.host == s.host && n->addr.port == s.port);
    if (!known) {
      auto n = std::make_shared<Node>();
      n->addr = s;
      nodes_.push_back(std::move(n));
    }
  }
}

Cluster::~Cluster() = default;

std::shared_ptr<Cluster::Node> Cluster::node_for(const NodeAddr &a) {
  for (auto &n : nodes_)
    if (n->addr.port == a.port && n->addr.host == a.host) return n;
  auto n = std::make_shared<Node>();
  n->addr = a;
  nodes_.push_back(n);
  return n;
}

std::shared_ptr<Cluster::Node> Cluster::route(uint16_t slot) const {
  std::shared_lock lk(table_mu_);
  int32_t i = slot_node_[slot];
  return i < 0 ? nullptr : nodes_[static_cast<size_t>(i)];
}

size_t Cluster::masters() const {
  std::shared_lock lk(table_mu_);
  std::vector<int32_t> seen;
  for (int32_t i : slot_node_)
    if (i >= 0 && std::find(seen.begin(), seen.end(), i) == seen.end()) seen.push_back(i);
  return seen.size();
}

size_t Cluster::slots_covered() const {
  std::shared_lock lk(table_mu_);
  return static_cast<size_t>(std::count_if(slot_node_.begin(), slot_node_.end(), [](int32_t i) { return i >= 0; }));
}

std::string Cluster::owner_of(const std::string &key) const {
  auto n = route(key_slot(key));
  return n ? n->addr.str() : std::string();
}

std::unique_ptr<Conn> Cluster::checkout(Node &n, Deadline dl, std::string *err) {
  if (now_ns() < n.down_until_ns.load(std::memory_order_relaxed)) {
    *err = n.addr.str() + ": failed recently (back-off)";
    return nullptr;
  }
  {
    std::lock_guard lk(n.mu);
    if (!n.idle.empty()) {
      std::unique_ptr<Conn> c = std::move(n.idle.back());
      n.idle.pop_back();
      return c;
    }
  }
  auto c = std::make_unique<Conn>();
  counters_.connects.fetch_add(1, std::memory_order_relaxed);
  if (!c->open(n.addr.host, n.addr.port, dl, opt_.auth, err)) {
    mark_down(n);
    return nullptr;
  }
  return c;
}

void Cluster::mark_down(Node &n) {
  n.down_until_ns.store(now_ns() + std::chrono::duration_cast<std::chrono::nanoseconds>(opt_.node_backoff).count(),
                        std::memory_order_relaxed);
  want_refresh();
}

void Cluster::checkin(Node &n, std::unique_ptr<Conn> c) {
  if (!c || !c->is_open()) return;
  std::lock_guard lk(n.mu);
  if (n.idle.size() < opt_.max_idle_per_node) n.idle.push_back(std::move(c));
}

bool Cluster::refresh(Deadline dl, std::string *err) {
  std::vector<std::shared_ptr<Node>> candidates;
  {
    std::shared_lock lk(table_mu_);
    // Masters of the current table first (they know the newest configuration), then the rest.
    std::vector<uint8_t> serving(nodes_.size(), 0);
    for (int32_t i : slot_node_)
      if (i >= 0) serving[static_cast<size_t>(i)] = 1;
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (serving[i]) candidates.push_back(nodes_[i]);
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (!serving[i]) candidates.push_back(nodes_[i]);
  }
  last_refresh_ns_.store(now_ns(), std::memory_order_relaxed);
  std::string why = "no server known";
  for (auto &cand : candidates) {
    if (Clock::now() >= dl) {
      why = "deadline passed";
      break;
    }
    std::string e;
    std::unique_ptr<Conn> c = checkout(*cand, dl, &e);
    if (!c) {
      why = e;
      continue;
    }
    Reply r;
    Io io = c->send(resp_command({"CLUSTER", "SLOTS"}), dl);
    if (io == Io::ok) io = c->read_reply(&r, dl);
    if (io != Io::ok) {
      why = cand->addr.str() + ": CLUSTER SLOTS: " + io_name(io);
      if (io == Io::timeout) {
        counters_.timeouts.fetch_add(1, std::memory_order_relaxed);
        mark_down(*cand);
      }
      continue;
    }
    if (r.type != Reply::array) {
      why = cand->addr.str() + ": CLUSTER SLOTS: " + (r.type == Reply::error ? r.str : "not an array");
      checkin(*cand, std::move(c));
      continue;
    }
    struct Range {
      long long start, end;
      NodeAddr master;
    };
    std::vector<Range> ranges;
    bool good = true;
    for (const Reply &e2 : r.elements) {
      if (e2.type != Reply::array || e2.elements.size() < 3 || e2.elements[0].type != Reply::integer ||
          e2.elements[1].type != Reply::integer || e2.elements[2].type != Reply::array ||
          e2.elements[2].elements.size() < 2 || e2.elements[2].elements[1].type != Reply::integer) {
        good = false;
        break;
      }
      Range rg{e2.elements[0].integer_value, e2.elements[1].integer_value, {}};
      const Reply &m = e2.elements[2];
      rg.master.host = m.elements[0].type == Reply::string && !m.elements[0].str.empty() ? m.elements[0].str : cand->addr.host;
      long long port = m.elements[1].integer_value;
      if (rg.start < 0 || rg.end >= kSlots || rg.start > rg.end || port <= 0 || port > 65535) {
        good = false;
        break;
      }
      rg.master.port = static_cast<uint16_t>(port);
      ranges.push_back(rg);
    }
    checkin(*cand, std::move(c));
    if (!good) {
      why = cand->addr.str() + ": CLUSTER SLOTS: a reply we cannot read";
      continue;
    }
    std::unique_lock lk(table_mu_);
    std::vector<int32_t> table(kSlots, -1);
    for (const Range &rg : ranges) {
      std::shared_ptr<Node> n = node_for(rg.master);
      auto idx = static_cast<int32_t>(std::find(nodes_.begin(), nodes_.end(), n) - nodes_.begin());
      for (long long s = rg.start; s <= rg.end; ++s) table[static_cast<size_t>(s)] = idx;
    }
    slot_node_.swap(table);
    refresh_wanted_.store(false, std::memory_order_relaxed);
    counters_.refreshes.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  if (err) *err = why;
  return false;
}

void Cluster::maybe_refresh(Deadline dl) {
  if (!refresh_wanted_.load(std::memory_order_relaxed)) return;
  const int64_t since = now_ns() - last_refresh_ns_.load(std::memory_order_relaxed);
  if (since < std::chrono::duration_cast<std::chrono::nanoseconds>(opt_.min_refresh_interval).count()) return;
  std::unique_lock lk(refresh_mu_, std::try_to_lock);
  if (!lk.owns_lock()) return;  // another thread is refreshing: route by the table we have
  std::string err;
  refresh(dl, &err);
}

void Cluster::execute(Op *ops, size_t n, Deadline dl) {
  maybe_refresh(dl);
  std::vector<Target> targets;
  auto target_for = [&](const std::shared_ptr<Node> &node) -> Target & {
    for (Target &t : targets)
      if (t.node == node) return t;
    targets.emplace_back();
    targets.back().node = node;
    return targets.back();
  };
  for (size_t i = 0; i < n; ++i) {
    Op &op = ops[i];
    op.status = OpStatus::pending;
    op.error.clear();
    uint16_t slot = key_slot(op.key);
    std::shared_ptr<Node> node = route(slot);
    if (!node) {
      op.status = OpStatus::failed;
      op.error = "no server serves slot " + std::to_string(slot);
      want_refresh();
      continue;
    }
    Target &t = target_for(node);
    t.ops.push_back(&op);
    t.asking.push_back(0);
  }
  run_round(targets, dl);

  // One redirection per command: a second one is a failure (the cluster is moving faster than
  // one deadline; the next call sees the refreshed table).
  std::vector<Target> again;
  for (Target &t : targets) {
    for (size_t i = 0; i < t.ops.size(); ++i) {
      Op *op = t.ops[i];
      if (op->status != OpStatus::pending) continue;
      NodeAddr to;
      bool ask = op->error.rfind("ASK ", 0) == 0;
      if (!parse_redirect(op->error, ask ? 4 : 6, t.node->addr.host, &to)) {
        op->status = OpStatus::refused;
        continue;
      }
      std::shared_ptr<Node> node;
      {
        std::unique_lock lk(table_mu_);
        node = node_for(to);
        if (!ask) {
          // MOVED: the slot lives there now; route its next commands there at once.
          auto idx = static_cast<int32_t>(std::find(nodes_.begin(), nodes_.end(), node) - nodes_.begin());
          slot_node_[key_slot(op->key)] = idx;
        }
      }
      Target *tt = nullptr;
      for (Target &x : again)
        if (x.node == node) tt = &x;
      if (tt == nullptr) {
        again.emplace_back();
        again.back().node = node;
        tt = &again.back();
      }
      tt->ops.push_back(op);
      tt->asking.push_back(ask ? 1 : 0);
    }
  }
  if (again.empty()) return;
  run_round(again, dl);
  for (Target &t : again)
    for (Op *op : t.ops)
      if (op->status == OpStatus::pending) {
        op->status = OpStatus::refused;
        op->error = "redirected twice: " + op->error;
      }
}

// Send every target's commands, then read every target's replies. An op left pending carries
// a MOVED/ASK error for the caller to follow.
void Cluster::run_round(std::vector<Target> &targets, Deadline dl) {
  auto fail_rest = [&](Target &t, size_t from, Io io, const std::string &why) {
    for (size_t i = from; i < t.ops.size(); ++i) {
      if (t.ops[i]->status != OpStatus::pending) continue;  // ops before `from` were read
      t.ops[i]->status = status_of(io);
      t.ops[i]->error = why;
    }
    if (io == Io::timeout) {
      counters_.timeouts.fetch_add(1, std::memory_order_relaxed);
      // A server that ran past a deadline (overloaded, or silently unreachable) is left alone
      // for the back-off: its slots miss at once instead of costing a deadline each.
      mark_down(*t.node);
    }
    if (t.conn) t.conn->close();
    t.conn.reset();
    want_refresh();
  };
  for (Target &t : targets) {
    std::string err;
    t.conn = checkout(*t.node, dl, &err);
    if (!t.conn) {
      fail_rest(t, 0, Io::error, err);
      continue;
    }
    t.prefixes.resize(t.ops.size());
    std::vector<iovec> iov;
    iov.reserve(t.ops.size() * 5);
    for (size_t i = 0; i < t.ops.size(); ++i) {
      Op &op = *t.ops[i];
      if (t.asking[i]) iov.push_back({const_cast<char *>(kAsking.data()), kAsking.size()});
      std::string &p = t.prefixes[i];
      if (op.kind == Op::set) {
        p = "*3\r\n$3\r\nSET\r\n$" + std::to_string(op.key.size()) + "\r\n" + op.key + "\r\n$" +
            std::to_string(op.head_bytes + op.body_bytes) + "\r\n";
        iov.push_back({p.data(), p.size()});
        if (op.head_bytes) iov.push_back({op.head, op.head_bytes});
        if (op.body_bytes) iov.push_back({op.body, op.body_bytes});
        iov.push_back({const_cast<char *>(kCrlf), 2});
      } else {
        p = "*2\r\n$3\r\nGET\r\n$" + std::to_string(op.key.size()) + "\r\n" + op.key + "\r\n";
        iov.push_back({p.data(), p.size()});
      }
      op.error.clear();
    }
    Io io = t.conn->send(iov.data(), static_cast<int>(iov.size()), dl);
    if (io != Io::ok) fail_rest(t, 0, io, t.node->addr.str() + ": sending: " + io_name(io));
  }
  for (Target &t : targets) {
    if (!t.conn) continue;
    Conn &c = *t.conn;
    const std::string peer = t.node->addr.str();
    for (size_t i = 0; i < t.ops.size(); ++i) {
      Op &op = *t.ops[i];
      Reply r;
      Io io = Io::ok;
      if (t.asking[i]) {
        io = c.read_reply(&r, dl);
        if (io != Io::ok) {
          fail_rest(t, i, io, peer + ": " + io_name(io));
          break;
        }
      }
      if (op.kind == Op::get) {
        char first = 0;
        io = c.peek(&first, dl);
        if (io == Io::ok && first == '$') {
          // The bulk reply of a GET: the payload goes straight into its destination.
          std::string line;
          io = c.read_line(&line, dl);
          long long len = -2;
          if (io == Io::ok) {
            auto [p, ec] = std::from_chars(line.data() + 1, line.data() + line.size(), len);
            if (ec != std::errc() || p != line.data() + line.size() || len < -1) io = Io::error;
          }
          if (io == Io::ok) {
            if (len == -1) {
              op.status = OpStatus::absent;
            } else if (static_cast<unsigned long long>(len) == op.head_bytes + op.body_bytes) {
              io = c.read_exact(op.head, op.head_bytes, dl);
              if (io == Io::ok) io = c.read_exact(op.body, op.body_bytes, dl);
              if (io == Io::ok) io = c.skip(2, dl);
              if (io == Io::ok) op.status = OpStatus::ok;
            } else {
              io = c.skip(static_cast<size_t>(len) + 2, dl);
              if (io == Io::ok) {
                op.status = OpStatus::wrong_size;
                op.error = "a value of " + std::to_string(len) + " bytes";
              }
            }
          }
          if (io != Io::ok) {
            fail_rest(t, i, io, peer + ": reading a value: " + io_name(io));
            break;
          }
          continue;
        }
      }
      if (io == Io::ok) io = c.read_reply(&r, dl);
      if (io != Io::ok) {
        fail_rest(t, i, io, peer + ": " + io_name(io));
        break;
      }
      if (r.type == Reply::error) {
        if (r.str.rfind("MOVED ", 0) == 0) {
          counters_.moved.fetch_add(1, std::memory_order_relaxed);
          want_refresh();
          op.error = r.str;  // stays pending: execute() follows it
        } else if (r.str.rfind("ASK ", 0) == 0) {
          counters_.ask.fetch_add(1, std::memory_order_relaxed);
          op.error = r.str;
        } else {
          op.status = OpStatus::refused;
          op.error = peer + ": " + r.str;
          if (r.str.rfind("CLUSTERDOWN", 0) == 0 || r.str.rfind("TRYAGAIN", 0) == 0) want_refresh();
        }
      } else if (op.kind == Op::set) {
        op.status = r.type == Reply::status ? OpStatus::ok : OpStatus::failed;
        if (op.status != OpStatus::ok) op.error = peer + ": unexpected reply to SET";
      } else if (r.type == Reply::nil) {
        op.status = OpStatus::absent;
      } else {
        op.status = OpStatus::failed;
        op.error = peer + ": unexpected reply to GET";
      }
    }
    if (t.conn) checkin(*t.node, std::move(t.conn));
  }
}

}  // namespace cxltier::remote
