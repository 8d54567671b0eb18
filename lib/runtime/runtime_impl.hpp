// SPDX-License-Identifier: Apache-2.0
// The runtime's internal state (runtime.cpp, migration.cpp, runtime_open.cpp share it).
//
// One mutex (`mu`) guards everything below it: the score store (which is also the block
// table: residency, pins, flags), every tier's pool and policy index, the job queue and the
// counters. Accesses by handle are the exception: engine threads check and record them
// without `mu`, and apply them under it at the call or in a drain (access_log.cpp). Bytes are never copied under it: migrations copy with the lock released (see the
// protocol in migration.cpp). Pool, index and store operations are O(1) or O(log n) and
// allocation-free in steady state, so the lock is held for well under a microsecond per block.
#pragma once

#include "lib/policy/eviction.hpp"
#include "lib/policy/lrfu_index.hpp"
#include "lib/store/score_store.hpp"
#include "lib/store/store_file.hpp"
#include "lib/memory/copy.hpp"
#include "lib/memory/pool.hpp"
#include "lib/runtime/access_log.hpp"
#include "lib/runtime/counted_lock.hpp"
#include "lib/runtime/parallel_drain.hpp"
#include "lib/runtime/counters.hpp"
#include "lib/runtime/remote.hpp"
#include "lib/runtime/placement.hpp"
#include "lib/memory/backend.hpp"

#include <cxltier/config.hpp>
#include <cxltier/runtime.hpp>
#include <cxltier/topology.hpp>

#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cxltier {

// Residency::flags bits.
constexpr uint8_t kFlagMoving = 1;         // a copy to another tier is in flight
constexpr uint8_t kFlagPromoteQueued = 2;  // in the promotion queue
constexpr uint8_t kFlagReleased = 4;       // the engine released it (cached, evictable)
constexpr uint8_t kFlagAdmitting = 8;      // an admission is placing it (the lock may be released)
constexpr uint8_t kFlagHeld = 16;          // move()/promote_sync are making room for it with the lock
                                           // released: no victim, not moved; the engine's pins are its own
constexpr uint8_t kFlagUnindexed = 32;     // resident, but out of its tier's policy index while a burst's
                                           // room is made (batch_room.cpp): accesses update its state only
// A resident block with any of these is in passage: a copy, another call's room or an admission
// has it, and until that ends it is neither a victim nor moved, nor counted as room
// (placement.cpp's scans, admit_batch's check, wait_out_passage).
constexpr uint8_t kFlagsInPassage = kFlagMoving | kFlagHeld | kFlagAdmitting | kFlagUnindexed;
// Resident and unpinned: a block that may move or make room, unless it is in passage.
inline bool resident_unpinned(const StoreEntry &e) noexcept { return e.res.tier >= 0 && e.res.pins == 0; }
inline bool in_passage(const StoreEntry &e) noexcept { return resident_unpinned(e) && (e.res.flags & kFlagsInPassage) != 0; }

struct TierRt {
  std::string name;
  TierKind kind = TierKind::unknown;
  std::string backend_name;
  std::vector<unsigned> nodes;
  double bandwidth_mib_s = 0;
  double latency_ns = 0;
  bool emulated = false;
  bool host = true;       // extents are CPU-addressable host memory
  bool no_bytes = false;  // the backend holds no bytes (CXLT_TRAIT_HOLDS_BYTES unset)
  std::unique_ptr<TierBackend> backend;
  std::unique_ptr<BlockPool> pool;
  std::unique_ptr<EvictionPolicy> policy;
  LrfuIndex *lrfu = nullptr;  // `policy` when it is the LRFU index: accesses call it directly
  uint32_t moving_out = 0;  // blocks being copied out of this tier (their slots still held)
#define CXLT_X(name) uint64_t name = 0;
  CXLT_TIER_COUNTERS(CXLT_X)  // counters.hpp
#undef CXLT_X
};

struct MoveJob {
  NodeId id;
  uint32_t generation;
  int src;
  SlotId src_slot;
  int dst;
  SlotId dst_slot;
  void *src_ptr;  // addresses taken under the lock at step 1 (nullptr for null tiers)
  void *dst_ptr;
  // A reconciling swap (placement.cpp): the block that moves up into this move's source
  // slot once this demotion is done (kNoNode: none).
  NodeId partner;
  uint32_t partner_generation;
};

// A write-out to the remote tier in flight (migration.cpp, steps W1-W3): where the bytes are.
struct WriteOut {
  NodeId id;
  uint32_t generation;
  int tier;
  SlotId slot;
  void *ptr;
};

struct __attribute__((visibility("hidden"))) Runtime::Impl {  // not exported (lib/cxltier.map)
  RuntimeConfig cfg;
  Topology topo;
  uint64_t block_bytes = 0;
  std::vector<TierRt> tiers;
  std::unique_ptr<ScoreStore> store;
  StoreLock store_lock;  // held on store.path's lock file until the runtime is gone
  size_t policy_ids = 0;
  CopyKernel kernel_down = CopyKernel::nt;  // demotions: stream around the cache
  CopyKernel kernel_up = CopyKernel::memcpy;  // promotions: the engine reads the block soon

  mutable std::mutex mu;
  // The threads waiting for mu, counted (counted_lock.hpp): what engine threads stand aside for
  // and pass_lock hands mu to. Every caller takes mu through lock(), relock(), lock_helping or
  // a CountedCv's wait, except an engine thread applying its batch at the call.
  mutable LockCount lock_count;
  CountedCv moved_cv{lock_count};  // a move finished (pin/release/close wait on it)
  CountedCv work_cv{lock_count};   // a job was queued, or stop
  CountedCv mover_cv{lock_count};  // wake the background mover, or stop
  std::deque<MoveJob> jobs;
  size_t in_flight = 0;  // moves between step 1 and step 3 of the protocol
  bool stopping = false;
  bool closed = false;        // close() has begun
  bool close_finished = false;  // ... and returned (or thrown); moved_cv is notified then
  std::vector<std::thread> workers;
  std::thread mover;
  std::vector<NodeId> promote_queue;
  std::vector<NodeId> mover_retry;  // mover_pass's scratch (kept: no allocation per pass)

  uint64_t now = 0;   // decode step
  uint64_t tick = 0;  // reference counter (LRU/LFU order within a step)
  uint64_t checkpoint_at_step = 0;

  // Counters (under mu), listed in counters.hpp.
#define CXLT_X(member, name) uint64_t member = 0;
  CXLT_RUNTIME_COUNTERS(CXLT_X)
#undef CXLT_X
#define CXLT_X(name) uint64_t name[CXLT_MAX_TIERS][CXLT_MAX_TIERS] = {};
  CXLT_PAIR_COUNTERS(CXLT_X)
#undef CXLT_X

  std::vector<NodeId> scratch;  // per-call scratch under mu (keeps its capacity)
  std::vector<uint64_t> opt_next;  // OPT: each block's next reference (trace replay)
  std::mutex checkpoint_mu;     // one checkpoint write at a time (taken without mu held)
  uint64_t checkpoint_written_tick = 0;  // under checkpoint_mu
  std::string last_move_error;  // message of the last failed copy (under mu)

  // --- admission.cpp
  static bool eligible_fn(const void *ctx, NodeId id) noexcept;
  static void eligible_warm_fn(const void *ctx, NodeId id) noexcept;
  Eligible eligible() const noexcept { return Eligible{&Impl::eligible_fn, this, &Impl::eligible_warm_fn}; }
  NodeId find_or_insert(const Key &key);
  void ensure_policy_ids();
  // The bytes a full store of `capacity` states costs per state (runtime_open.cpp).
  double bytes_per_state(uint64_t capacity) const noexcept;
  void install(NodeId id, int tier, SlotId slot);
  void drop(NodeId id);
  // The block leaves its tier (policy, pool, residency); its state stays in the store. drop()
  // is this for a policy eviction, counted; release(forget) calls it directly.
  void unplace(NodeId id, EraseReason why);
  int place(std::unique_lock<std::mutex> &lk, NodeId id);
  // Who asked for the room: an operation that needs it (a failure reaches its caller as an
  // error), or the runtime by its own choice (a failure is a migration failure and the caller
  // goes on without the room).
  enum class RoomFor : uint8_t { needed, chosen };
  bool make_room(std::unique_lock<std::mutex> &lk, int tier, RoomFor why, int depth = 0);
  // Resident, unpinned blocks that can be neither a victim nor counted as room for the moment:
  // a copy moves them (kFlagMoving), another call holds them while it makes room (kFlagHeld,
  // kFlagUnindexed) or admits them (kFlagAdmitting). Each such state ends without the caller:
  // the copy finishes, the other call returns. With none, returns false at once; else waits
  // (the lock released) until every block found so has left it, and returns true.
  // A wait ends after kPassageWait at most (a copy of one block takes about a millisecond),
  // kPassageWait past remote.deadline_ms with a remote tier (a write-out takes at most its
  // deadline), returning true only if some block found has left its passage by then, and
  // returns false when close() interrupts it, so that a flag left set by a fault never hangs an
  // admission: it is refused after one or two such bounds.
  // *found (when given): the blocks in passage it found.
  bool wait_out_passage(std::unique_lock<std::mutex> &lk, size_t *found = nullptr);
  static constexpr std::chrono::milliseconds kPassageWait{1000};
  void restore_or_reset(NodeId id, bool *restored_out);
  int last_tier() const noexcept { return static_cast<int>(tiers.size()) - 1; }

  // --- access.cpp (and what every access path applies, inline here)
  // Inline: the batch calls build one per key, and a call returning the Block through memory
  // cost a store-forwarding stall per key when the caller copied it out.
  uint64_t handle_of(NodeId id) const noexcept { return (static_cast<uint64_t>((*store)[id].res.generation()) << 32) | id; }
  Block block_of(NodeId id) const noexcept {
    const StoreEntry &e = (*store)[id];
    Block b;
    b.tier = e.res.tier;
    b.bytes = block_bytes;
    b.handle = handle_of(id);
    b.data = e.res.tier >= 0 ? tiers[e.res.tier].pool->address(e.res.slot()) : nullptr;
    return b;
  }
  // An access to a resident block: its state, its tier's index and counters, the promotion
  // queue. Inline: the locked paths (access by key or handle, reference) apply one per key, and
  // the drain one per recorded access where a tier's policy is not LRFU (with LRFU in every tier
  // it applies the split access: apply_in_order_lrfu, access_log.cpp).
  [[gnu::always_inline]] void note_access(NodeId id, float attention) noexcept {
    StoreEntry &e = (*store)[id];
    update_state(e, attention, ++tick);
    e.res.flags = static_cast<uint8_t>(e.res.flags & ~kFlagReleased);
    TierRt &t = tiers[e.res.tier];
    if ((e.res.flags & (kFlagMoving | kFlagUnindexed)) == 0) {
      if (t.lrfu != nullptr)
        t.lrfu->access(id, e.st);
      else
        t.policy->access(id, e.st);
    }
    ++t.hits;
    ++accesses;
    if (promotion_due(e) && promote_queue.size() < kPromoteQueueLimit) {
      e.res.flags |= kFlagPromoteQueued;
      promote_queue.push_back(id);
    }
  }
  // What an access does to a block's remembered state (score, step, count, tick), resident or not.
  void update_state(StoreEntry &e, float attention, uint64_t at_tick) const noexcept {
    const uint64_t idle = now >= e.st.last_access ? now - e.st.last_access : 0;
    // Touch mode is lrfu_access's update alone, inline here (an access is a few nanoseconds).
    e.st.score = cfg.lrfu.mode == ScoreMode::touch ? lrfu_update(e.st.score, attention, cfg.lrfu.alpha)
                                                   : lrfu_access(e.st.score, idle, attention, cfg.lrfu);
    e.st.last_access = now;
    ++e.st.accesses;
    e.st.tick = at_tick;
  }
  // Whether an access to a resident block queues it for promotion (when the queue has room).
  bool promotion_due(const StoreEntry &e) const noexcept {
    return e.res.tier > 0 && cfg.promotion != PromotionRule::never && !cfg.synchronous &&
           (e.res.flags & kFlagPromoteQueued) == 0;
  }
  static constexpr size_t kPromoteQueueLimit = 65536;  // blocks queued for promotion at most

  // --- access_log.cpp: accesses by handle, which wait for `mu` only with a full shard, a batch
  // larger than a buffer, or for a bounded while to apply a batch at the call (the protocol is
  // there).
  // Engine threads check a handle against its id's word here (the lowest ids) or its store
  // entry's place word, whose slot is set whenever the block becomes resident in a tier
  // (install) and cleared when it becomes resident nowhere (drop, release(forget),
  // finish_writeout), where the word is published too; validate() checks that they agree.
  LowIdWords low_words;
  AccessLog log;
  bool log_access_handles(const uint64_t *handles, const float *attention, size_t n);  // false: take the locked path
  void drain_accesses() noexcept;  // [mu held] apply every recorded access
  void apply_records(const AccessRecord *r, size_t n) noexcept;
  // Protocol step 3, for one record (inline: the drain's loop applies one per access).
  [[gnu::always_inline]] void apply_access(NodeId id, uint32_t generation, float attention) noexcept {
    StoreEntry *const found = store->current(id, generation);
    if (!found) return;  // forgotten since, the id reused for another key
    StoreEntry &e = *found;
    if (e.res.tier >= 0) {
      note_access(id, attention);
      return;
    }
    // Dropped since the handle was checked: the access came first, so the remembered state has it.
    update_state(e, attention, ++tick);
    store->restate(id);
    ++accesses;
  }
  // Prefetch for an access some places on: the store line first (index false), then, once it
  // has had time to arrive, the index lines of the tier it names (index true): with LRFU none
  // (the store line is all an LRFU access writes), with one tier without reading the line.
  // Inline: the drain calls it twice per access.
  [[gnu::always_inline]] void prefetch_access(NodeId id, bool index) const noexcept {
    if (id >= store->id_limit()) return;
    const StoreEntry &e = (*store)[id];
    if (!index) {
      __builtin_prefetch(&e, 1);
      return;
    }
    // An LRFU access writes the store line only (the indexes keep their stamps there), which
    // the first prefetch asked for. A lone tier's index fetches its lines without the store
    // line, which may not be here yet.
    if (tiers[0].lrfu != nullptr) return;
    if (tiers.size() == 1) {
      tiers[0].policy->prefetch(id);
      return;
    }
    if (e.res.tier >= 0 && static_cast<size_t>(e.res.tier) < tiers.size()) tiers[e.res.tier].policy->prefetch(id);
  }
  // The same for a reference some places on, once its store line has had time to arrive: an
  // LRFU admission (the block resident nowhere) writes the id's record as well as its stamp, a
  // hit the store line only.
  [[gnu::always_inline]] void prefetch_reference(NodeId id) const noexcept {
    if (tiers[0].lrfu == nullptr) {
      prefetch_access(id, true);
      return;
    }
    if (id < store->id_limit() && (*store)[id].res.tier < 0) tiers[0].lrfu->prefetch(id);
  }
  bool prefetch_pays() const noexcept;
  void note_id_limit() noexcept;
  std::atomic<bool> prefetch_ahead{false};  // see prefetch_pays (access_log.cpp)
  // access_handles applies its batch at the call when it can take the mutex (access_log.cpp,
  // step 2). Tests clear it to send every batch through the log.
  std::atomic<bool> apply_at_call{true};
  uint64_t batches_at_call = 0;  // [mu] batches applied at the call so (tests)
  // Set while a thread holds mu to apply its batch at the call: another engine thread waits a
  // bounded while for mu then, rather than leave its batch to a drain (access_log.cpp, step 2).
  std::atomic<bool> applying_at_call{false};
  static constexpr unsigned kAtCallWaitUs = 50;  // the most one batch waits for mu there (pausing)
  std::atomic<unsigned> at_call_wait_us{kAtCallWaitUs};  // tests lengthen it
  std::atomic<uint64_t> at_call_waits{0};  // waits begun so (tests)
  // [no lock; true: mu taken] Step 2's take of mu for a batch applied at the call. by_entry: the
  // batch's handles were checked by their store entries (many ids; step 1).
  bool lock_at_call(bool by_entry) noexcept;
  bool all_lrfu = false;  // every tier's policy is the LRFU index (set at open)
  // --- parallel_drain.cpp: a drain applied by the draining thread and waiting engine threads.
  ParallelDrain par;
  bool drain_in_parts() noexcept;  // [mu held] false: not worth it here, drain serially
  bool help_drain() noexcept;      // [no lock] apply parts of an open drain; true if any
  // [no lock] Step 3 of parallel_drain.cpp: claim and apply parts; `first`, if given, gets the
  // first part this thread claimed.
  unsigned claim_parts(int shard, bool from_back, unsigned *first = nullptr) noexcept;
  // [no lock; takes mu into lk] Lock mu, helping any drain in parts meanwhile, and spinning a
  // bounded while before blocking, so that a drain opened just after this thread began to wait
  // still finds it.
  void lock_helping(std::unique_lock<std::mutex> &lk) noexcept;
  // [no lock; returns mu held] Lock mu for a call that decides from policy state (a query, an
  // admission, the mover, a worker's finished copy), counted in lock_count while it waits:
  // engine threads then leave mu to it (access_log.cpp, step 2) and a long holder passes it.
  std::unique_lock<std::mutex> lock() const;
  void relock(std::unique_lock<std::mutex> &lk) const { lock_count.lock(lk); }  // mu released a while
  uint64_t lock_handovers = 0;  // [mu] pass_lock calls in which a waiting thread took mu (tests read it)
  // [mu held, in lk] A long holder of mu that may pause (the reconciliation's scan) calls this
  // between its chunks: when a thread is counted waiting for mu (lock_count), mu is released
  // until one such thread has taken it, or for 1 ms at most, and then taken back (after that thread is done
  // with it). Anything read under mu before the call may have changed after it.
  void pass_lock(std::unique_lock<std::mutex> &lk) noexcept;
  // [no lock] With the caller's shard full and more than one engine thread: wait a bounded
  // while for another thread's drain to make room, helping any drain in parts, and append; false
  // (nothing appended) if no room came.
  bool wait_for_room(const uint64_t *handles, const float *attention, size_t n) noexcept;
  void apply_part(unsigned p) noexcept;
  // Protocol step 3 of parallel_drain.cpp for one record, `place` in drain order: apply_access
  // and note_access, with what parts share kept in the part's slot and what step 5 must do in
  // `outcome` at the place; a record of a block resident nowhere is only marked (kStateOnly)
  // for step 5. Inline: apply_part applies one per access.
  [[gnu::always_inline]] void apply_access_own(const AccessRecord &rec, ParallelDrain::Part &part, uint32_t place) noexcept {
    uint16_t &outcome = par.outcome[place];
    StoreEntry *const found = store->current(rec.id, rec.generation);
    if (!found) {  // forgotten since, the id reused for another key
      outcome = 0;
      return;
    }
    StoreEntry &e = *found;
    if (e.res.tier < 0) {  // dropped since the handle was checked: the state only, in step 5
      outcome = ParallelDrain::kStateOnly;
      ++part.states_only;
      return;
    }
    update_state(e, rec.attention, par.tick_base + 1 + place);
    ++part.accesses;
    const auto t = static_cast<unsigned>(e.res.tier);
    if (e.res.flags & kFlagReleased) e.res.flags = static_cast<uint8_t>(e.res.flags & ~kFlagReleased);
    uint16_t out = static_cast<uint16_t>(ParallelDrain::kApplied | t);
    if ((e.res.flags & (kFlagMoving | kFlagUnindexed)) == 0) {
      const TierRt &tr = tiers[t];
      if (tr.lrfu != nullptr ? tr.lrfu->access_own_external(rec.id, e.res.policy_stamp) : tr.policy->access_own(rec.id, e.st)) {
        out |= ParallelDrain::kNotePending;
        ++part.notes;
      }
      part.min_score[t] = part.indexed[t] ? std::min(part.min_score[t], e.st.score) : e.st.score;
      part.indexed[t] = true;
    }
    ++part.hits[t];
    if (promotion_due(e)) {
      e.res.flags |= kFlagPromoteQueued;  // step 5 queues it, or clears this if the queue is full
      out |= ParallelDrain::kPromote;
      part.promotes = true;
    }
    outcome = out;
  }
  // [mu held] Runtime::reference after its checks (admission.cpp).
  ReferenceResult reference_locked(std::unique_lock<std::mutex> &lk, const Key &key, float attention, uint64_t next_use);

  // --- migration.cpp
  bool move_now(std::unique_lock<std::mutex> &lk, NodeId id, int dst, SlotId dst_slot, std::string *err);
  // partner: a reconciling swap's block that moves up into id's slot once id is down (placement.cpp).
  void schedule_move(NodeId id, int dst, SlotId dst_slot, NodeId partner = kNoNode);
  // [mu held, in lk] One wait of a call that waits for a flagged block (moving, being admitted,
  // held by another call) to leave its passage, on moved_cv. Once close() has begun the call
  // fails instead (CXLT_ERROR_CLOSED, naming `what`): a flag that a fault left set would
  // otherwise hold it for good.
  void wait_moved(std::unique_lock<std::mutex> &lk, const char *what);
  MoveJob begin_move(NodeId id, int dst, SlotId dst_slot);
  cxlt_result_t copy_bytes(const MoveJob &job, uint64_t *ns, std::string *err);
  void finish_move(const MoveJob &job, bool ok, uint64_t ns, bool cancelled = false);
  cxlt_result_t allocate_for_move(int tier, SlotId *out);
  bool promote_candidate(NodeId id, NodeId *upper_victim);
  void promote_sync(std::unique_lock<std::mutex> &lk, NodeId id);
  void worker_loop();
  void mover_loop();
  void mover_pass(std::unique_lock<std::mutex> &lk);
  void start_threads();
  void stop_threads();
  void write_checkpoint_now(std::unique_lock<std::mutex> &lk);

  // --- the remote tier (remote.hpp): nullptr when [remote] is off. Declared after `tiers`, so
  // it is destroyed first; ~Runtime stops it (every write-out finished) before freeing memory.
  std::unique_ptr<RemoteTier> remote;
  // migration.cpp: a drop decided by the policy. With the remote tier on (and the block's
  // score at the threshold or above) its bytes are written out first: in this thread with the
  // lock released when `wait` (make_room), else by the client's threads.
  void policy_drop(std::unique_lock<std::mutex> &lk, NodeId id, bool wait);
  WriteOut begin_writeout(NodeId id);
  void finish_writeout(const WriteOut &w, bool written);
  // admission.cpp: an admitted block (placed, flagged admitting) filled from the remote copy,
  // the lock released meanwhile. True when the slot holds the verified block.
  bool fetch_remote(std::unique_lock<std::mutex> &lk, NodeId id);

  // --- placement.cpp: placement quality (placement.hpp), its state under mu.
  mutable PlacementTrack placement;
  // Decaying LRFU's factor (1-alpha)^d for each idle time d below kDecayFactors (empty for the
  // other policies and modes), by the same std::pow call as lrfu_effective_score: the scans
  // below multiply by it instead of calling pow for each block. Filled at open (alpha is fixed
  // from then on). An idle time this long or longer takes the pow.
  static constexpr size_t kDecayFactors = 4096;
  std::vector<double> decay_factor;
  double keep_value(NodeId id) const noexcept;  // the value the promotion rule compares (higher: keep in a faster tier)
  // keep_value of a state (`tick_of`: the tick the tick-ordered policies compare; `id` for OPT's next use).
  double keep_value_of(const PolicyState &st, NodeId id, uint64_t tick_of) const noexcept;
  // batch_room.cpp: the keep value block `id` (kNoNode: a key never seen) will have once admitted
  // now, its state restored or reset as admission does.
  double keep_value_as_admitted(NodeId id) const noexcept;
  // batch_room.cpp: room for the admission of `keys` (the resident ones need none), made with
  // each tier level's demotions copied as one batch by the migration workers. Releases the lock.
  void make_room_for_batch(std::unique_lock<std::mutex> &lk, const Key *keys, size_t n);
  // [mu held] Each movable block's keep value, per tier, into by_tier (cleared first); returns
  // the snapshot's number for placement.record.
  uint64_t snapshot_keep_values(std::vector<std::vector<double>> &by_tier) const;
  // Reconciling the tiers' order (placement.cpp): swaps out-of-order pairs of adjacent
  // tiers, at most `budget` moves; returns the moves begun. Scheduled for the workers, or
  // copied in this thread (the lock released) when the runtime is synchronous.
  size_t reconcile(std::unique_lock<std::mutex> &lk, size_t budget);
  void finish_swap(const MoveJob &job, bool ok);  // [mu held] finish_move's part for a swap's demotion
  // wait_idle: copies done and a mover pass, begun after the call, that found nothing to do.
  bool wait_settled(std::unique_lock<std::mutex> &lk, int64_t timeout_ms);
  struct Ranked {
    double keep;
    NodeId id;
    uint32_t generation;
  };
  std::vector<std::vector<Ranked>> rank_all, rank_low, rank_high;  // reconcile's scratch (keeps capacity)
  uint32_t swap_in[CXLT_MAX_TIERS] = {};  // swap demotions not yet answered by their partner's promotion, per destination
  uint64_t moves_begun = 0;                // protocol step 1s and write-outs begun (the mover's work signal)
  uint64_t mover_passes = 0;               // mover passes begun
  uint64_t quiet_pass = 0;                 // the last pass that scanned the order and found nothing to do, nothing in flight
  uint64_t idle_pass = 0;                  // the last pass with nothing to do and no scan pending that moved blocks
  uint64_t next_reconcile_ns = 0;          // the mover's next scan for inversions, unless a wait_idle waits
  bool reconcile_again = false;            // the last scan moved blocks: scan again next pass
  bool reconcile_stale = false;            // the last scan's pair out of order was not, by current values, once the lock was retaken
  bool last_scan_whole = true;              // the mover's last scan saw no copy in flight and no stale pair
  bool reconciling = false;                // a reconcile call owns the scratch (the lock may be released)
  unsigned settle_waiters = 0;             // wait_idle calls waiting for the order to settle
};

}  // namespace cxltier
