// SPDX-License-Identifier: Apache-2.0
// The access path without the runtime's mutex: residency words that a handle is checked
// against without a lock, and the sharded buffer that engine threads append accesses to. The
// protocol that makes this exact is the numbered comment in access_log.cpp.
#pragma once

#include "lib/policy/eviction.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

namespace cxltier {

// One word per NodeId, written under the runtime's mutex whenever a block becomes resident in
// some tier (install) or resident in none (drop, release(forget), a finished write-out), and
// read by engine threads without it: 0 = resident nowhere, else (generation << 1) | 1.
// Chunked so that it can grow while readers hold no lock: chunks are allocated under the
// runtime's mutex, published with release, and freed only when the table goes.
class ResidencyTable {
public:
  ResidencyTable();
  ~ResidencyTable();
  ResidencyTable(const ResidencyTable &) = delete;
  ResidencyTable &operator=(const ResidencyTable &) = delete;

  static constexpr unsigned kChunkBits = 18;  // 262,144 ids (2 MiB, a huge page) a chunk
  static constexpr size_t kChunks = (size_t{1} << 31) >> kChunkBits;  // ids < 2^31 (the store's limit)
  static constexpr size_t kBytesPerId = sizeof(std::atomic<uint64_t>);  // one residency word an id

  // [runtime mutex held, before the first ensure] Whether chunks ask for huge pages (the default).
  void set_huge_pages(bool on) noexcept { huge_pages_ = on; }
  // [runtime mutex held] Make ids below n addressable (may allocate a chunk).
  void ensure(size_t n);
  // [runtime mutex held] Publish that `id` (of `generation`) is resident in some tier, or not.
  void publish(NodeId id, uint32_t generation, bool resident) noexcept;
  // [no lock] True when the handle's block is resident in some tier now.
  bool resident(uint64_t handle) const noexcept {
    const NodeId id = static_cast<NodeId>(handle & 0xffffffffu);
    if ((id >> kChunkBits) >= kChunks) return false;
    const std::atomic<uint64_t> *c = dir_[id >> kChunkBits].load(std::memory_order_acquire);
    if (c == nullptr) return false;
    const uint64_t want = ((handle >> 32) << 1) | 1u;
    return c[id & ((1u << kChunkBits) - 1)].load(std::memory_order_acquire) == want;
  }
  void prefetch(uint64_t handle) const noexcept {
    const NodeId id = static_cast<NodeId>(handle & 0xffffffffu);
    if ((id >> kChunkBits) >= kChunks) return;
    const std::atomic<uint64_t> *c = dir_[id >> kChunkBits].load(std::memory_order_relaxed);
    if (c) __builtin_prefetch(c + (id & ((1u << kChunkBits) - 1)));
  }
  // [runtime mutex held] The published word of `id` (0 when none), for validate().
  uint64_t word(NodeId id) const noexcept;
  size_t bytes() const noexcept;  // memory held: the directory and every chunk

private:
  std::unique_ptr<std::atomic<std::atomic<uint64_t> *>[]> dir_;
  size_t chunks_ = 0;  // chunks allocated, [0, chunks_) (runtime mutex)
  bool huge_pages_ = true;
};

// One access waiting to be applied.
struct AccessRecord {
  NodeId id;
  uint32_t generation;
  float attention;
  uint32_t unused = 0;
};

// Accesses recorded by engine threads, applied in batch under the runtime's mutex. Shards
// (kShards, each with its own small mutex and two buffers) keep threads apart: a thread takes
// the shard it was given at its first access, so two engine threads append in parallel and a
// drain swaps a shard's buffer out rather than holding the shard while it applies.
class AccessLog {
public:
  static constexpr size_t kShards = 8;
  static constexpr size_t kCapacity = 4096;  // records a shard buffer holds (16 B each)

  AccessLog();
  // [no lock] Append n accesses (already checked against the residency table). False, and
  // nothing appended, when the caller's shard has no room for all n.
  bool append(const uint64_t *handles, const float *attention, size_t n) noexcept;
  // True when some shard may hold records (a drain has something to do).
  bool pending() const noexcept { return pending_.load(std::memory_order_acquire) != 0; }
  // Records appended and not yet drained (a hint: appenders may add more meanwhile).
  size_t pending_records() const noexcept { return pending_.load(std::memory_order_acquire); }
  // Shards that some thread has appended to: more than one means more than one engine thread.
  unsigned shards_in_use() const noexcept { return shards_in_use_.load(std::memory_order_relaxed); }
  // [runtime mutex held: one drainer at a time] Hand every record appended so far to f, shard
  // by shard, each shard's in the order it was appended.
  template <typename F>
  void drain(F &&f) {
    if (!pending()) return;
    for (Shard &s : shards_) {
      AccessRecord *buf;
      size_t n;
      {
        std::lock_guard g(s.mu);
        buf = s.active;
        n = s.n;
        if (n == 0) continue;
        s.active = buf == s.bufs[0].get() ? s.bufs[1].get() : s.bufs[0].get();
        s.n = 0;
        pending_.fetch_sub(n, std::memory_order_acq_rel);
      }
      f(buf, n);  // the swapped-out buffer: appenders write the other one meanwhile
    }
  }
  size_t bytes() const noexcept { return kShards * 2 * kCapacity * sizeof(AccessRecord); }

private:
  struct alignas(64) Shard {
    std::mutex mu;
    AccessRecord *active = nullptr;
    size_t n = 0;
    std::unique_ptr<AccessRecord[]> bufs[2];
  };
  Shard shards_[kShards];
  std::atomic<size_t> pending_{0};
  std::atomic<unsigned> shards_in_use_{0};
};

}  // namespace cxltier
