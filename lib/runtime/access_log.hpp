// SPDX-License-Identifier: Apache-2.0
// The access path without the runtime's mutex: the residency words of the lowest ids and the
// sharded buffer that engine threads append accesses to, once each handle is checked without a
// lock (against those words, or its store entry: ScoreStore::handle_resident). The protocol
// that makes this exact is the numbered comment in access_log.cpp.
#pragma once

#include "lib/policy/eviction.hpp"
#include "lib/runtime/spin_wait.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

namespace cxltier {

// Residency words for the ids below kIds, which an engine thread's handle check reads instead
// of the block's store entry while the store has issued few ids (access_log.cpp, step 1). These
// words are written only when a block becomes resident or resident nowhere, so engine threads
// on several cores keep them cached, where the store entry that the drain writes at every
// access would cross from core to core (two threads at 1K resident blocks ran 3.5x slower
// checking the entries). With many ids the entries are checked: a word of its own would be one
// more random line from memory for each access. 128 KiB a runtime.
class LowIdWords {
public:
  static constexpr NodeId kIds = NodeId{1} << 14;

  LowIdWords() : words_(new std::atomic<uint64_t>[kIds]) {
    for (NodeId i = 0; i < kIds; ++i) words_[i].store(0, std::memory_order_relaxed);
  }
  // [runtime mutex held] Publish that `id` (of `generation`) is resident in some tier, or not;
  // a no-op for ids past kIds.
  void publish(NodeId id, uint32_t generation, bool resident) noexcept {
    if (id < kIds) words_[id].store(word_for(generation, resident), std::memory_order_release);
  }
  // [no lock; ids below kIds] True when the handle's block is resident in some tier now.
  bool resident(uint64_t handle) const noexcept {
    return words_[handle & (kIds - 1)].load(std::memory_order_acquire) ==
           word_for(static_cast<uint32_t>(handle >> 32), true);
  }
  // The word of a block of `generation` resident in some tier: (generation << 1) | 1; else 0.
  static constexpr uint64_t word_for(uint32_t generation, bool resident) noexcept {
    return resident ? (static_cast<uint64_t>(generation) << 1) | 1u : 0;
  }
  // [runtime mutex held; ids below kIds] The published word (0 when resident nowhere), for validate().
  uint64_t word(NodeId id) const noexcept { return words_[id].load(std::memory_order_relaxed); }

private:
  std::unique_ptr<std::atomic<uint64_t>[]> words_;
};

// One access waiting to be applied.
struct AccessRecord {
  NodeId id;
  uint32_t generation;
  float attention;
  // 0 as appended; a drain in parts marks a record it moved out of its part (kMoved) and gives
  // the copy it applies later its place in drain order (parallel_drain.hpp).
  uint32_t mark = 0;

  // The i-th access of a batch by handle (a handle's low 32 bits are its id, its high 32 the
  // generation); attention 1 where the caller gave none.
  static AccessRecord of(const uint64_t *handles, const float *attention, size_t i) noexcept {
    return {static_cast<NodeId>(handles[i] & 0xffffffffu), static_cast<uint32_t>(handles[i] >> 32),
            attention ? attention[i] : 1.0f, 0};
  }
};

// Accesses recorded by engine threads, applied in batch under the runtime's mutex. Shards
// (kShards, each with its own small mutex and two buffers) keep threads apart: each of the
// first kShards threads to record in this log owns a shard of its own (later ones share one,
// by the thread's token), so two engine threads append in parallel and a drain swaps a shard's
// buffer out rather than holding the shard while it applies. A thread keeps its shard in a
// log for the log's life: its records stay in the order it made them. Each appended batch takes
// a number from one counter (AccessLog::Batch), and a drain hands the batches on in the order
// of their numbers, whatever shards they are in: a batch appended after another had been
// appended (in another thread that synchronised with this one, or in this one) is applied after
// it, as the runtime's mutex would have applied them.
class AccessLog {
public:
  static constexpr size_t kShards = 8;
  static constexpr size_t kCapacity = 4096;  // records a shard buffer holds (16 B each)
  // A shard lock is held for an append's copy (at most kCapacity records, a few microseconds)
  // or a drain's swap of buffers: a thread that finds it taken pauses this many microseconds,
  // trying it, before it blocks (lock_spinning). Blocking at once made the drainer sleep in
  // the kernel behind the other engine thread's append at about one step in twenty, each
  // time for a wake-up that took longer than the copy.
  static constexpr unsigned kShardLockSpinUs = 20;

  // One appended batch in a shard's buffer: its number (from the log's counter, taken under the
  // shard lock as it is appended) and where its records end in the buffer. A buffer holds at
  // most kCapacity batches (one record each), so the list beside it never fills first.
  struct Batch {
    uint32_t seq;
    uint32_t end;
  };
  // Whether batch number a was taken before b. The numbers wrap; the batches waiting in one
  // drain span far fewer than 2^31 of them.
  static bool before(uint32_t a, uint32_t b) noexcept { return static_cast<int32_t>(a - b) < 0; }
  // A shard's records swapped out by a drain: its buffer and the batches in it.
  struct Taken {
    unsigned shard;
    AccessRecord *records;
    const Batch *batches;
    size_t nbatches;
  };

  AccessLog();
  // [no lock] Count the calling thread's shard as used from the thread's first access by
  // handle, whether its batches are appended or applied at the call: shards_in_use() says
  // whether more than one engine thread records.
  void join() noexcept {
    Shard &s = shards_[own_shard()];
    if (!s.used.load(std::memory_order_relaxed)) mark_used(s);
  }
  // [no lock] Append n accesses (each handle already checked: ScoreStore::handle_resident) as one
  // batch. False, and nothing appended, when the caller's shard has no room for all n.
  bool append(const uint64_t *handles, const float *attention, size_t n) noexcept;
  // True when some shard may hold records (a drain has something to do).
  bool pending() const noexcept { return pending_.load(std::memory_order_acquire) != 0; }
  // Records appended and not yet drained (a hint: appenders may add more meanwhile).
  size_t pending_records() const noexcept { return pending_.load(std::memory_order_acquire); }
  // Shards that some thread has joined or appended to: more than one means more than one engine
  // thread (threads past the first kShards share shards and are not counted again).
  unsigned shards_in_use() const noexcept { return shards_in_use_.load(std::memory_order_relaxed); }
  // The shard the calling thread records to in this log: the one it owns, or the one it shares
  // while its last record was in this log; else -1.
  int thread_shard() const noexcept;
  // [runtime mutex held: one drainer at a time] Swap every shard's buffer out, holding every
  // shard lock at once (so the batches taken are every batch appended before some moment, and
  // a batch appended later has a larger number than each of them); out[] gets each shard with
  // records, in shard order; returns how many. The buffers are the drainer's (it may write
  // them) until the next take.
  size_t take(Taken *out) noexcept;
  // Hand the taken batches to f(shard, records, n) in the order of their numbers, a shard's
  // consecutive batches in one call (one call a shard where no shard's batches came between
  // another's). Returns the number of calls.
  template <typename F>
  static size_t in_order(const Taken *taken, size_t k, F &&f) {
    size_t next[kShards] = {};  // per taken shard, its next batch
    size_t calls = 0;
    for (;;) {
      size_t best = k;
      for (size_t j = 0; j < k; ++j)
        if (next[j] < taken[j].nbatches &&
            (best == k || before(taken[j].batches[next[j]].seq, taken[best].batches[next[best]].seq)))
          best = j;
      if (best == k) return calls;
      // The run: this shard's batches up to the first that another shard's next batch precedes.
      const Taken &t = taken[best];
      bool other = false;  // another shard has batches left; `first` the number of the earliest
      uint32_t first = 0;
      for (size_t j = 0; j < k; ++j)
        if (j != best && next[j] < taken[j].nbatches && (!other || before(taken[j].batches[next[j]].seq, first))) {
          first = taken[j].batches[next[j]].seq;
          other = true;
        }
      const size_t from = next[best] == 0 ? 0 : t.batches[next[best] - 1].end;
      size_t last = next[best] + 1;
      while (last < t.nbatches && (!other || before(t.batches[last].seq, first))) ++last;
      next[best] = last;
      f(t.shard, t.records + from, t.batches[last - 1].end - from);
      ++calls;
    }
  }
  // [runtime mutex held: one drainer at a time] take() every record appended so far and hand it
  // to f(shard, records, n) in_order.
  template <typename F>
  void drain(F &&f) {
    if (!pending()) return;
    Taken taken[kShards];
    in_order(taken, take(taken), f);
  }

private:
  struct alignas(64) Shard {
    std::mutex mu;
    AccessRecord *active = nullptr;
    size_t n = 0;
    Batch *batches = nullptr;  // the active buffer's batches
    size_t nbatches = 0;
    std::unique_ptr<AccessRecord[]> bufs[2];
    std::unique_ptr<Batch[]> batch_bufs[2];
    std::atomic<bool> used{false};  // counted in shards_in_use_
  };
  // The calling thread's shard in this log: the one it owns (owners_), claimed at its first
  // use here; once every shard is owned, its token modulo kShards, the same at every call. A
  // one-entry cache per thread (the last log it used, by id_, never reused) makes the common
  // case a compare.
  unsigned own_shard() noexcept;
  // The shard the calling thread owns here, or kShards when it owns none.
  unsigned owned_shard(uint64_t me) const noexcept;
  static uint64_t thread_token() noexcept;
  void mark_used(Shard &s) noexcept {
    if (!s.used.exchange(true, std::memory_order_relaxed)) shards_in_use_.fetch_add(1, std::memory_order_relaxed);
  }
  const uint64_t id_;  // unique among this process's logs; read by every call
  alignas(64) std::atomic<uint64_t> owners_[kShards] = {};  // a thread's token, or 0: not owned
  Shard shards_[kShards];
  std::atomic<size_t> pending_{0};
  std::atomic<unsigned> shards_in_use_{0};
  // The next batch's number: every append takes one, on a line of its own (appenders of two
  // shards write it, once a batch).
  alignas(64) std::atomic<uint32_t> next_batch_{0};
};

// The fixed memory docs/runtime.md states: 128 KiB of residency words a runtime, and 192 KiB a
// shard a thread has appended to (two buffers of kCapacity records and beside each its batches).
static_assert(LowIdWords::kIds * sizeof(std::atomic<uint64_t>) == 128 * 1024);
static_assert(2 * AccessLog::kCapacity * (sizeof(AccessRecord) + sizeof(AccessLog::Batch)) == 192 * 1024);

}  // namespace cxltier
