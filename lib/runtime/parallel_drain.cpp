// SPDX-License-Identifier: Apache-2.0
// A drain of the access log (access_log.cpp, protocol step 3) applied by more than one thread.
//
// With one engine thread the drain is applied by whoever holds the runtime's mutex M, record by
// record. With two, one thread applies while the other, its shard full or at step(), waits for
// M: two threads record no faster than one applies. Here the waiting thread helps instead, and
// each thread applies the records of its own shard where it can (the records it made, and
// those of any thread sharing the shard: past the first AccessLog::kShards threads): its handle
// check (access_log.cpp step 1) brought their store lines to its core, and the buffer it
// appended them to is in its cache.
//
// The parallel drain protocol (D: the thread that drains, holding M throughout; H: an engine
// thread waiting for room in its full shard (wait_for_room) or for M, its shard full or in
// step() (lock_helping) or to apply its batch at the call (lock_at_call), or one that found a
// drain open after its append):
//  1. [M held by D] D drains in parts only when more than one shard holds records, at least
//     kMinRecords records wait, prefetching pays (many ids: the records miss the cache), and
//     every tier's policy splits its access (eviction.hpp). D takes every shard's buffer (as
//     the serial drain does: AccessLog::take) and sets the drain order, the serial drain's:
//     the batches in the order of their numbers (AccessLog::in_order), so that a batch that
//     returned before another began is applied first, as M would have applied it. Where that
//     order interleaves two shards' batches, D applies it serially instead (a part is a range
//     of one shard's records); otherwise it is the shards one after another. It cuts each
//     shard's records by position into kShardParts parts, so that each part is a range of the
//     drain order; gives each record its tick (tick_base
//     + 1 + its place in drain order, as the serial drain's ++tick would have, except that a
//     record refused in step 3 leaves its tick unused); resets the parts' counters; and has
//     each policy make room for the pending ids the round can add (prepare_access_own).
//  2. D resets `ready`, `claimed` and `done`, writes `expected` (the parts with records), and
//     sets `open` (seq_cst): everything step 1 wrote happens before a helper that sees `open`
//     reads it.
//  3. [D alone] D places the records, part by part in drain order: a record whose block's bit
//     in `seen` (a bitmap of the blocks that earlier parts recorded, by a hash of the id) is
//     set is copied to kLater, with its place, and flagged kMoved where it was; then the bits of
//     the part's blocks are set. A block's records in its first part all get the same answer
//     (a bit shared with another block moves them all), and those in any later part are all
//     moved. So every record of a block is either in the part of its first record, in drain
//     order, or in kLater, in drain order after all of those. A part's records are final once
//     it is placed (only later parts' records are tested against it), and D makes it ready
//     (`ready`, fetch_or, release) before it places the next.
//     [D and any H, without M for H] Each claims ready parts one at a time (a compare-and-swap
//     on `claimed`, after an acquire load of `ready`): its own shard's first (D the lowest, H
//     the highest), and then any; an H whose own parts are not all ready yet waits for them
//     (up to kHelperWaitUs, then it takes any part, and then it leaves) rather than take
//     another thread's lines. It applies the claimed part's records
//     (skipping those flagged kMoved) as the serial drain would, except what other parts
//     share: the store line and the policy's own record of a block are written only by the
//     thread that holds the part its records are in; counters and the lowest indexed score go
//     to the part's slot, and what step 5 must do for a record to `outcome` at its place (not
//     to the record: D read its line while placing). A record of a block resident nowhere
//     (dropped since its handle was checked, or being admitted with M released) is only
//     marked so: its state update may move the state in a bounded store's forget order, which
//     only D writes (step 5). A part applied counts `done` (release). H enters by incrementing
//     `helpers` before it reads `open` and leaves by decrementing it (both seq_cst), and
//     claims nothing once `open` is clear (nor when a relaxed read of `open` before it entered
//     found it clear: it then touches nothing).
//  4. When every part is placed and claimed, D clears `open` (seq_cst) and waits until `done`
//     counts every part with records and `helpers` is 0 (acquire). By the seq_cst order of
//     steps 3 and 4, a helper either was counted in `helpers` before D read it (D waits for
//     it) or reads `open` clear (it touches nothing). So when D goes on, no helper is in this
//     drain, and every part's writes happen before D's reads. D clears `seen` for the next drain
//     and applies kLater's records itself, in drain order: after every part, so after the
//     earlier records of their blocks.
//  5. [M held by D] D sums the parts' counters into the runtime's; then, reading again only the
//     parts (kLater last) that counted notes, promotions or records resident nowhere, in drain
//     order, it applies those records' state updates (with the ticks step 1 gave them, each
//     counted in `accesses`; in drain order for each block, by step 3) and passes the records
//     that need it to note_pending and the promotion queue (in drain order, as the serial
//     drain queues them), and each tier's lowest score and the step to note_pending_bound. Then
//     M is released as after a serial drain, and everything the protocol access_log.cpp
//     numbers (order, what a later call sees) holds: no call that takes M can run between
//     steps 1 and 5.
// Locks: H holds no lock while it helps (it left its shard lock when its append failed), and D
// holds M only, so the lock order of access_log.cpp is unchanged. A helper waits inside a
// drain only for its own parts while D places records (microseconds, and never past `open`
// clearing); otherwise it helps while there are parts to claim. Waiting for M, it spins a
// bounded while (trying M, helping any open drain, pausing) before it blocks on M as before, so
// that a drain opened just after it began to wait still has its help.
#include "lib/runtime/runtime_impl.hpp"
#include "lib/runtime/spin_wait.hpp"
#include "lib/runtime/test_access.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <new>
#include <thread>

namespace cxltier {

namespace {
// One round of pass_lock's wait: a pause, and every 8th round the core for another thread (the
// waiting thread it hands the mutex to may be on this core).
inline void wait_round(unsigned i) noexcept {
  if ((i & 7) == 7)
    std::this_thread::yield();
  else
    cpu_relax();
}
}  // namespace

void Runtime::Impl::apply_part(unsigned p) noexcept {
  // The part's counters in a copy on this thread's stack while its records are applied: the
  // part's slot may alias the store lines the loop writes (members of the same types), so the
  // compiler would load and store its counters again for every access (as apply_in_order_lrfu
  // in access_log.cpp keeps its running values in locals).
  ParallelDrain::Part part = par.parts[p];
  AccessRecord *r = part.records;
  const size_t n = part.n;
  constexpr size_t kStoreAhead = 16, kIndexAhead = 8;  // as apply_in_order (access_log.cpp)
  // A record moved to kLater is skipped (kLater applies it after its block's first part).
  const bool later = p == ParallelDrain::kLater;
  const auto apply = [&](size_t i) __attribute__((always_inline)) {
    const auto k = static_cast<uint32_t>(i);
    if ((r[i].mark & ParallelDrain::kMoved) == 0) apply_access_own(r[i], part, ParallelDrain::place_of(part, later, k));
  };
  if (all_lrfu) {  // an LRFU access writes the store line only: no index lines to fetch
    for (size_t i = 0; i < n; ++i) {
      if (i + kStoreAhead < n) prefetch_access(r[i + kStoreAhead].id, false);
      apply(i);
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      if (i + kStoreAhead < n) prefetch_access(r[i + kStoreAhead].id, false);
      if (i + kIndexAhead < n) prefetch_access(r[i + kIndexAhead].id, true);
      apply(i);
    }
  }
  par.parts[p] = part;
}

// Step 3: claim and apply ready parts until none is left, those of `shard` (this thread's, or
// -1) first; a helper (from_back) waits while parts of its own are not yet ready, so as not to
// take another thread's lines instead. Returns how many this thread applied.
unsigned Runtime::Impl::claim_parts(int shard, bool from_back, unsigned *first) noexcept {
  using PD = ParallelDrain;
  uint32_t own = shard < 0 ? 0 : ((uint32_t{1} << PD::kShardParts) - 1) << (static_cast<unsigned>(shard) * PD::kShardParts);
  unsigned claimed = 0;
  SpinBudget wait(ParallelDrain::kHelperWaitUs);
  for (;;) {
    const uint32_t ready = par.ready.load(std::memory_order_acquire);
    uint32_t c = par.claimed.load(std::memory_order_relaxed);
    unsigned p = 0;
    bool got = false;
    for (;;) {
      const uint32_t free = ready & ~c;
      if (free == 0) break;
      // Own parts of this drain not yet ready: a helper waits for them (D makes every part
      // ready before it claims).
      if ((free & own) == 0 && from_back && (own & par.expected & ~ready) != 0) break;
      const uint32_t pick = (free & own) != 0 ? free & own : free;
      p = from_back ? 31u - static_cast<unsigned>(__builtin_clz(pick)) : static_cast<unsigned>(__builtin_ctz(pick));
      if (par.claimed.compare_exchange_weak(c, c | uint32_t{1} << p, std::memory_order_acq_rel, std::memory_order_relaxed)) {
        got = true;
        break;
      }
    }
    if (!got) {
      // Nothing to claim now: done when every part is claimed (or, for a helper, when the drain
      // has closed); else parts are still being placed, so wait a round. A helper waits
      // kHelperWaitUs at most: then it takes any part, or leaves the rest to D.
      if ((c | ~par.expected) == ~uint32_t{0} || !par.open.load(std::memory_order_acquire)) return claimed;
      if (!wait.spin()) {
        if (own == 0) return claimed;
        own = 0;
      }
      continue;
    }
    if (first != nullptr && claimed == 0) *first = p;
    apply_part(p);
    par.done.fetch_add(1, std::memory_order_release);
    ++claimed;
    wait = SpinBudget(ParallelDrain::kHelperWaitUs);  // the wait counts from the last part applied
  }
}

bool Runtime::Impl::help_drain() noexcept {
  // No drain open: return without writing `helpers`, whose line the drainer reads, on every
  // round of a spinning thread. Reading `open` clear here is step 3's "claims nothing".
  if (!par.open.load(std::memory_order_relaxed)) return false;
  par.helpers.fetch_add(1, std::memory_order_seq_cst);
  unsigned helped = 0;
  if (par.open.load(std::memory_order_seq_cst)) helped = claim_parts(log.thread_shard(), true);
  if (helped != 0) par.parts_helped.fetch_add(helped, std::memory_order_relaxed);
  par.helpers.fetch_sub(1, std::memory_order_seq_cst);
  return helped != 0;
}

uint64_t RuntimeTestAccess::parallel_drains(Runtime &rt) {
  std::lock_guard g(rt.impl_->mu);
  return rt.impl_->par.drains;
}

uint64_t RuntimeTestAccess::interleaved_drains(Runtime &rt) {
  std::lock_guard g(rt.impl_->mu);
  return rt.impl_->par.interleaved;
}

void RuntimeTestAccess::claim_parts_in_reverse(Runtime &rt, bool on) {
  std::lock_guard g(rt.impl_->mu);
  rt.impl_->par.reverse_claims = on;
}

unsigned RuntimeTestAccess::drainer_first_part(Runtime &rt) {
  std::lock_guard g(rt.impl_->mu);
  return rt.impl_->par.drainer_first;
}

uint64_t RuntimeTestAccess::parts_helped(Runtime &rt) { return rt.impl_->par.parts_helped.load(std::memory_order_relaxed); }

void Runtime::Impl::lock_helping(std::unique_lock<std::mutex> &lk) noexcept {
  // A thread blocked on M cannot help a drain opened after it blocked, and a drain in parts is
  // opened by whoever holds M next: the other engine thread, within microseconds. So spin a
  // while (kLockSpinUs), helping whenever a drain is open, and block only after that: the
  // holder of M may be waiting for this core, and the kernel wakes a blocked waiter when M is
  // free. (A spin of 4,096 rounds yielding every 64th took the core from the thread holding M
  // where threads outnumbered cores: a TSan run of the drain test took 3.4 times as long.)
  // The count and the take are pass_lock's (below).
  SpinBudget wait(ParallelDrain::kLockSpinUs);
  lock_count.lock_counted(lk, [&] { return help_drain() || wait.spin(); });
}

std::unique_lock<std::mutex> Runtime::Impl::lock() const {
  std::unique_lock lk(mu, std::defer_lock);
  relock(lk);
  return lk;
}

// Handing M to a waiting thread (T: a thread in lock_helping, or one taking M through
// LockCount::lock: Impl::lock, relock, a CountedCv's wait; H: a holder of M that can pause, the
// reconciliation's scan of every block, about 4 ms at 1M blocks in one piece):
//  1. T counts itself in lock_count.waiters (seq_cst) before it waits for M (lock_helping before
//     its first try, LockCount::lock after a try that failed), and once it holds M counts a take
//     in lock_count.takes and itself out (release).
//  2. H, between two chunks of its work, reads lock_count.waiters (seq_cst). Zero: H goes on
//     holding M (a T that counts itself in afterwards waits for the next chunk's end). Else H
//     reads lock_count.takes, releases M, waits until it has changed (acquire: some T has held
//     M) or 1 ms has passed, pausing and yielding meanwhile, and takes M again as a T does
//     (relock), blocking while T holds it.
//  3. Without step 2's wait H would take M back at once: std::mutex is not fair, and a T
//     blocked in the kernel wakes after H has it again. With it, a T waits for M one chunk
//     (about 0.06 ms at 1M blocks) rather than the whole scan (about 4 ms).
//  4. H assumes nothing read under M before step 2 still holds after it: the scan's values are
//     checked again under M before anything is moved (placement.cpp). The bound keeps H from
//     waiting on a T that is slow to wake or on a count that other Ts keep above zero.
void Runtime::Impl::pass_lock(std::unique_lock<std::mutex> &lk) noexcept {
  if (lock_count.waiters.load(std::memory_order_seq_cst) == 0) return;
  const uint64_t takes = lock_count.takes.load(std::memory_order_acquire);
  lk.unlock();
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
  bool taken = false;
  for (unsigned i = 0; !(taken = lock_count.takes.load(std::memory_order_acquire) != takes); ++i) {
    if ((i & 63) == 63 && std::chrono::steady_clock::now() >= until) break;
    wait_round(i);
  }
  relock(lk);
  if (taken) ++lock_handovers;
}

uint64_t RuntimeTestAccess::lock_handovers(Runtime &rt) {
  std::lock_guard lk(rt.impl_->mu);
  return rt.impl_->lock_handovers;
}

RuntimeTestAccess::IndexUpkeep RuntimeTestAccess::index_upkeep(Runtime &rt, size_t rank) {
  std::lock_guard lk(rt.impl_->mu);
  const LrfuIndex *ix = rank < rt.impl_->tiers.size() ? rt.impl_->tiers[rank].lrfu : nullptr;
  if (ix == nullptr) return {};
  return {ix->stats().upkeep_rebuilds, ix->stats().upkeep_completed};
}

bool Runtime::Impl::wait_for_room(const uint64_t *handles, const float *attention, size_t n) noexcept {
  // Only shards ever used say that other engine threads record (a thread that has stopped
  // still counts); with one, no other is likely to drain soon (the mover passes every 2 ms), and
  // a batch larger than a buffer never fits: drain here at once. The wait is shorter than
  // lock_helping's: where engine threads meet at a barrier before one calls step(), the drain
  // waited for cannot come, and all of the wait is lost.
  if (n > AccessLog::kCapacity || log.shards_in_use() < 2) return false;
  SpinBudget wait(ParallelDrain::kRoomWaitUs);
  for (unsigned i = 0;; ++i) {
    if (help_drain()) continue;
    if ((i & 3) == 3 && log.append(handles, attention, n)) {
      help_drain();  // a drain opened meanwhile, as after any append
      return true;
    }
    if (wait.spin()) continue;
    // Out of time, perhaps after a help that outlasted the budget: one last try.
    if (!log.append(handles, attention, n)) return false;
    help_drain();
    return true;
  }
}

bool Runtime::Impl::drain_in_parts() noexcept {
  using PD = ParallelDrain;
  // Step 1.
  if (log.shards_in_use() < 2 || log.pending_records() < PD::kMinRecords || !prefetch_pays()) return false;
  for (const TierRt &t : tiers)
    if (!t.policy->splits_access()) return false;
  if (!par.later || !par.promote_at || !par.outcome || !par.seen) {
    constexpr size_t kMost = AccessLog::kShards * AccessLog::kCapacity;
    par.later.reset(new (std::nothrow) AccessRecord[kMost]);
    par.promote_at.reset(new (std::nothrow) NodeId[kMost]);
    par.outcome.reset(new (std::nothrow) uint16_t[kMost]);
    par.seen.reset(new (std::nothrow) uint64_t[PD::kSeenWords]());
    if (!par.later || !par.promote_at || !par.outcome || !par.seen) return false;  // the serial drain needs no memory
  }
  // The drain order is the batches' (access_log.hpp: in the order of their numbers). It is
  // cut into parts only where it is each shard's records whole, one shard after another (each
  // thread's batches of the drain appended without another thread's between them: one batch a
  // thread, as at a decode step's end); parts of interleaved shards would apply a block's
  // accesses out of that order.
  AccessLog::Taken taken[AccessLog::kShards];
  const size_t ntaken = log.take(taken);
  AccessRecord *bufs[AccessLog::kShards];
  size_t lens[AccessLog::kShards];
  unsigned shard_of[AccessLog::kShards];
  size_t nbufs = 0, total = 0;
  const size_t runs = AccessLog::in_order(taken, ntaken, [&](unsigned shard, AccessRecord *r, size_t n) {
    if (nbufs < AccessLog::kShards) {
      bufs[nbufs] = r;
      lens[nbufs] = n;
      shard_of[nbufs] = shard;
    }
    ++nbufs;
    total += n;
  });
  // Fewer records than the hint said, or one shard's only (the other threads have stopped
  // recording, or share it: no helper is likely, and one thread applies faster without the
  // parts), or shards interleaved: the serial drain, in the same order.
  if (total < PD::kMinRecords || ntaken < 2 || runs != ntaken) {
    if (total >= PD::kMinRecords && ntaken >= 2) ++par.interleaved;
    AccessLog::in_order(taken, ntaken, [this](unsigned, AccessRecord *r, size_t n) { apply_records(r, n); });
    return true;
  }
  ++par.drains;
  // The parts: each shard's records cut by position, the shards in drain order. Each record's
  // place in drain order is its part's first place plus its index in the part.
  const int mine = log.thread_shard();
  for (PD::Part &part : par.parts) {
    part.records = nullptr;
    part.n = 0;
    part.accesses = 0;
    std::fill(std::begin(part.hits), std::end(part.hits), uint64_t{0});
    std::fill(std::begin(part.indexed), std::end(part.indexed), false);
    part.promotes = false;
    part.notes = 0;
    part.states_only = 0;
  }
  unsigned order[PD::kParts + 1];  // the parts with records, in drain order (and kLater, in step 5)
  unsigned to_do = 0;
  uint32_t expected = 0;
  uint32_t place = 0;
  for (size_t b = 0; b < nbufs; ++b) {
    const size_t cut = (lens[b] + PD::kShardParts - 1) / PD::kShardParts;
    for (unsigned c = 0; c < PD::kShardParts && c * cut < lens[b]; ++c) {
      const unsigned p = shard_of[b] * PD::kShardParts + c;
      PD::Part &part = par.parts[p];
      part.records = bufs[b] + c * cut;
      part.n = static_cast<uint32_t>(std::min(cut, lens[b] - c * cut));
      part.first = place;
      place += part.n;
      order[to_do++] = p;
      expected |= uint32_t{1} << p;
    }
  }
  par.tick_base = tick;
  tick += total;
  for (TierRt &t : tiers) t.policy->prepare_access_own(total);
  // Step 2.
  par.expected = expected;
  par.ready.store(0, std::memory_order_relaxed);
  par.claimed.store(0, std::memory_order_relaxed);
  par.done.store(0, std::memory_order_relaxed);
  par.open.store(true, std::memory_order_seq_cst);
  // Step 3, the drainer's first part: each part in drain order is made ready once its records
  // are placed. A record whose block's bit in `seen` (kSeenBits, by a hash of the id) is set
  // was recorded by an earlier part, or shares its bit with a block that was: it is moved to
  // kLater. The bits of a part's blocks are set after all of its records are tested, so every
  // record of a block gets the same answer in its first part (all moved, or none) and every
  // record in a later part is moved; a part's records are final once it is placed.
  uint64_t *const seen = par.seen.get();
  const auto bit_of = [](NodeId id) noexcept -> uint32_t { return (id * 0x9E3779B1u) >> (32 - PD::kSeenLog2); };
  AccessRecord *const later = par.later.get();
  uint32_t nlater = 0;
  for (unsigned k = 0; k < to_do; ++k) {
    const unsigned p = order[k];
    // The part's layout in locals: once the part is ready, a helper applying it writes its slot.
    AccessRecord *const records = par.parts[p].records;
    const uint32_t n = par.parts[p].n, first = par.parts[p].first;
    if (k != 0)  // the first part's records can follow no other
      for (uint32_t i = 0; i < n; ++i) {
        AccessRecord &r = records[i];
        const uint32_t bit = bit_of(r.id);
        if ((seen[bit >> 6] >> (bit & 63) & 1) == 0) continue;
        later[nlater] = r;
        later[nlater++].mark = first + i;
        r.mark = PD::kMoved;
      }
    par.ready.fetch_or(uint32_t{1} << p, std::memory_order_release);
    if (k + 1 == to_do) break;  // the last part's bits are tested by no other
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t bit = bit_of(records[i].id);
      seen[bit >> 6] |= uint64_t{1} << (bit & 63);
    }
  }
  par.parts[PD::kLater].records = later;
  par.parts[PD::kLater].n = nlater;
  // Steps 3 and 4.
  claim_parts(mine, par.reverse_claims, &par.drainer_first);
  par.open.store(false, std::memory_order_seq_cst);
  // A helper takes microseconds a part; one that does not come back within kDrainWaitUs was
  // descheduled, and may need this core.
  for (SpinBudget wait(PD::kDrainWaitUs);
       par.done.load(std::memory_order_acquire) < to_do || par.helpers.load(std::memory_order_seq_cst) != 0;)
    if (!wait.spin()) std::this_thread::yield();
  std::fill(seen, seen + PD::kSeenWords, uint64_t{0});  // for the next drain (D's alone)
  if (nlater != 0) apply_part(PD::kLater);
  // Step 5.
  double min_score[CXLT_MAX_TIERS];
  bool indexed[CXLT_MAX_TIERS] = {};
  bool promotes = false;
  for (const PD::Part &part : par.parts) {
    accesses += part.accesses;
    promotes = promotes || part.promotes;
    for (size_t t = 0; t < tiers.size(); ++t) {
      tiers[t].hits += part.hits[t];
      if (!part.indexed[t]) continue;
      min_score[t] = indexed[t] ? std::min(min_score[t], part.min_score[t]) : part.min_score[t];
      indexed[t] = true;
    }
  }
  if (promotes) std::fill(par.promote_at.get(), par.promote_at.get() + total, kNoNode);
  order[to_do] = PD::kLater;
  for (unsigned k = 0; k <= to_do; ++k) {  // in drain order, kLater last
    const PD::Part &part = par.parts[order[k]];
    // Only the parts with something to pass on are read again: in a step whose blocks are
    // all pending already (accessed since the last victim search), that is none of them.
    if (part.notes == 0 && !part.promotes && part.states_only == 0) continue;
    const bool later_part = &part == &par.parts[PD::kLater];
    for (uint32_t i = 0; i < part.n; ++i) {
      const AccessRecord &r = part.records[i];
      if (r.mark & PD::kMoved) continue;  // applied in kLater
      const uint32_t at = PD::place_of(part, later_part, i);
      const uint16_t outcome = par.outcome[at];
      if (outcome == PD::kStateOnly) {  // in drain order within the part, as step 3 would have
        update_state((*store)[r.id], r.attention, par.tick_base + 1 + at);
        store->restate(r.id);
        ++accesses;
        continue;
      }
      if ((outcome & PD::kApplied) == 0) continue;
      const unsigned t = outcome & PD::kTierMask;
      if (outcome & PD::kNotePending) tiers[t].policy->note_pending(r.id);
      if (outcome & PD::kPromote) par.promote_at[at] = r.id;
    }
  }
  for (size_t i = 0; promotes && i < total; ++i) {
    const NodeId id = par.promote_at[i];
    if (id == kNoNode) continue;
    if (promote_queue.size() < kPromoteQueueLimit)
      promote_queue.push_back(id);
    else
      (*store)[id].res.flags = static_cast<uint8_t>((*store)[id].res.flags & ~kFlagPromoteQueued);
  }
  for (size_t t = 0; t < tiers.size(); ++t)
    if (indexed[t]) tiers[t].policy->note_pending_bound(min_score[t], now);
  return true;
}

}  // namespace cxltier
