// SPDX-License-Identifier: Apache-2.0
// The remote tier on Redis Cluster: what the runtime sees (lib/runtime/remote.hpp) built on the
// cluster client. Fetches run in the caller's thread; write-outs are queued for a few threads
// that pipeline what has gathered (up to kBatch blocks per round) and call back when the
// server has acknowledged (or refused) each block.
#include "lib/core/secret_file.hpp"
#include "lib/runtime/remote.hpp"
#include "tiers/remote/cluster.hpp"
#include "tiers/remote/value.hpp"

#include <cxltier/error.hpp>

#include <condition_variable>
#include <cstdio>
#include <deque>
#include <thread>

namespace cxltier {

namespace {

using namespace cxltier::remote;

constexpr size_t kBatch = 4;  // write-outs pipelined per round by one thread

class RedisTier final : public RemoteTier {
public:
  explicit RedisTier(const RuntimeConfig &cfg, ClusterOptions opt)
      : cluster_(std::move(opt)),
        ns_(remote_namespace(cfg)),
        ns_hash_(namespace_hash(ns_)),
        deadline_(cfg.remote.deadline_ms),
        threshold_(cfg.remote.write_threshold),
        max_pending_(cfg.remote.max_pending) {
    std::string err;
    if (!cluster_.refresh(Clock::now() + deadline_ * 4, &err))
      std::fprintf(stderr, "cxltier: remote: no cluster server answered (%s); fetches miss until one does\n", err.c_str());
    for (uint32_t i = 0; i < cfg.remote.concurrency; ++i) threads_.emplace_back([this] { writer_loop(); });
  }

  ~RedisTier() override { stop(); }

  bool fetch(const Key &key, void *dst, size_t bytes) noexcept override {
    try {
      ValueHeader h;
      Op op;
      op.kind = Op::get;
      op.key = block_key(ns_, key);
      op.head = &h;
      op.head_bytes = sizeof h;
      op.body = dst;
      op.body_bytes = bytes;
      cluster_.execute(&op, 1, Clock::now() + deadline_);
      if (op.status == OpStatus::ok) {
        if (check_header(h, key, ns_hash_, bytes).empty() && check_payload(h, dst, bytes)) {
          hits_.fetch_add(1, std::memory_order_relaxed);
          bytes_in_.fetch_add(bytes, std::memory_order_relaxed);
          return true;
        }
        corrupt_.fetch_add(1, std::memory_order_relaxed);
      } else if (op.status == OpStatus::wrong_size) {
        corrupt_.fetch_add(1, std::memory_order_relaxed);
      } else if (op.status != OpStatus::absent) {
        count_failure(op.status);
      }
    } catch (...) {  // out of memory building a key: a miss like any other
      failures_.fetch_add(1, std::memory_order_relaxed);
    }
    misses_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }

  bool store(const Key &key, const void *src, size_t bytes) noexcept override {
    try {
      Job j{key, src, bytes, nullptr};
      return write_batch(&j, 1)[0];
    } catch (...) {
      failures_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
  }

  bool store_async(const Key &key, const void *src, size_t bytes, std::function<void(bool)> done) noexcept override {
    try {
      std::lock_guard lk(mu_);
      if (stopping_ || pending_ >= max_pending_) return false;
      queue_.push_back(Job{key, src, bytes, std::move(done)});
      ++pending_;
    } catch (...) {
      return false;
    }
    cv_.notify_one();
    return true;
  }

  void note_skipped() noexcept override { skipped_.fetch_add(1, std::memory_order_relaxed); }

  void stop() noexcept override {
    {
      std::lock_guard lk(mu_);
      if (stopping_ && threads_.empty()) return;
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread &t : threads_)
      if (t.joinable()) t.join();
    threads_.clear();
  }

  RemoteCounters counters() const noexcept override {
    RemoteCounters c;
    c.hits = hits_.load(std::memory_order_relaxed);
    c.misses = misses_.load(std::memory_order_relaxed);
    c.writeouts = writeouts_.load(std::memory_order_relaxed);
    c.failures = failures_.load(std::memory_order_relaxed);
    c.bytes_out = bytes_out_.load(std::memory_order_relaxed);
    c.bytes_in = bytes_in_.load(std::memory_order_relaxed);
    c.skipped = skipped_.load(std::memory_order_relaxed);
    c.corrupt = corrupt_.load(std::memory_order_relaxed);
    c.timeouts = cluster_.counters().timeouts.load(std::memory_order_relaxed);
    c.moved = cluster_.counters().moved.load(std::memory_order_relaxed);
    c.ask = cluster_.counters().ask.load(std::memory_order_relaxed);
    c.refreshes = cluster_.counters().refreshes.load(std::memory_order_relaxed);
    return c;
  }

  double write_threshold() const noexcept override { return threshold_; }

  std::string describe() const override {
    return "redis-cluster, " + std::to_string(cluster_.masters()) + " masters serving " +
           std::to_string(cluster_.slots_covered()) + " of 16384 slots, namespace '" + ns_ + "'";
  }

private:
  struct Job {
    Key key;
    const void *src;
    size_t bytes;
    std::function<void(bool)> done;
  };

  void count_failure(OpStatus s) noexcept {
    failures_.fetch_add(1, std::memory_order_relaxed);
    (void)s;  // timeouts are counted by the cluster client (once per connection that ran late)
  }

  // SET a batch in one pipelined round (several servers at once); one result per job.
  std::vector<bool> write_batch(Job *jobs, size_t n) {
    std::vector<ValueHeader> heads(n);
    std::vector<Op> ops(n);
    for (size_t i = 0; i < n; ++i) {
      heads[i] = make_header(jobs[i].key, ns_hash_, jobs[i].src, jobs[i].bytes);
      ops[i].kind = Op::set;
      ops[i].key = block_key(ns_, jobs[i].key);
      ops[i].head = &heads[i];
      ops[i].head_bytes = sizeof(ValueHeader);
      ops[i].body = const_cast<void *>(jobs[i].src);  // only read (sendmsg)
      ops[i].body_bytes = jobs[i].bytes;
    }
    cluster_.execute(ops.data(), n, Clock::now() + deadline_ * static_cast<int>(n));
    std::vector<bool> ok(n);
    for (size_t i = 0; i < n; ++i) {
      ok[i] = ops[i].status == OpStatus::ok;
      if (ok[i]) {
        writeouts_.fetch_add(1, std::memory_order_relaxed);
        bytes_out_.fetch_add(jobs[i].bytes, std::memory_order_relaxed);
      } else {
        count_failure(ops[i].status);
      }
    }
    return ok;
  }

  void writer_loop() {
    std::vector<Job> batch;
    std::unique_lock lk(mu_);
    while (true) {
      cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      batch.clear();
      while (!queue_.empty() && batch.size() < kBatch) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      lk.unlock();
      std::vector<bool> ok;
      try {
        ok = write_batch(batch.data(), batch.size());
      } catch (...) {
        ok.assign(batch.size(), false);
        failures_.fetch_add(batch.size(), std::memory_order_relaxed);
      }
      for (size_t i = 0; i < batch.size(); ++i)
        if (batch[i].done) batch[i].done(ok[i]);
      lk.lock();
      pending_ -= batch.size();
    }
  }

  Cluster cluster_;
  const std::string ns_;
  const uint64_t ns_hash_;
  const std::chrono::milliseconds deadline_;
  const double threshold_;
  const size_t max_pending_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  size_t pending_ = 0;  // queued or being written
  bool stopping_ = false;
  std::vector<std::thread> threads_;

  std::atomic<uint64_t> hits_{0}, misses_{0}, writeouts_{0}, failures_{0}, bytes_out_{0}, bytes_in_{0}, skipped_{0},
      corrupt_{0};
};

}  // namespace

std::unique_ptr<RemoteTier> open_remote_tier(const RuntimeConfig &cfg) {
  const RemoteConfig &rc = cfg.remote;
  if (rc.seeds.empty()) fail(CXLT_ERROR_CONFIG, "remote.seeds is empty: name at least one cluster server (HOST:PORT)");
  std::string ns = remote_namespace(cfg);
  if (std::string why = check_namespace(ns); !why.empty())
    fail(CXLT_ERROR_CONFIG, "the remote namespace '", ns, "' ", why, " (remote.namespace, remote.model, remote.dtype)");
  ClusterOptions opt;
  for (size_t i = 0; i < rc.seeds.size(); ++i)
    opt.seeds.push_back(parse_node_addr(rc.seeds[i], "remote.seeds[" + std::to_string(i) + "]"));
  opt.auth.user = rc.user;
  if (!rc.password_file.empty()) opt.auth.password = read_password_file(rc.password_file, "remote.password_file");
  opt.max_idle_per_node = std::max<size_t>(8, rc.concurrency + 2);
  return std::make_unique<RedisTier>(cfg, std::move(opt));
}

}  // namespace cxltier
