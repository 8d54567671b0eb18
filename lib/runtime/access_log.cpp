// SPDX-License-Identifier: Apache-2.0
// The access path by handle, which waits for the runtime's mutex (M below) only when its
// shard of the access buffer is full and no other thread drains it, or its batch is larger
// than a buffer, or for a bounded while when another engine thread holds M to apply its batch:
// the handle check against the store entry, the batch applied at the call or appended to the
// sharded access buffer, and the buffer's drain.
//
// The access protocol (an engine thread E records accesses to blocks by handle):
//  1. [no lock] E checks every attention value and every handle of the batch, prefetching the
//     entries ahead when prefetch_ahead (an atomic hint written under M as ids are issued) says
//     so, and then checking each handle against its entry; otherwise (few ids) against the
//     residency word of each id below LowIdWords::kIds (access_log.hpp says why) and the entry
//     of any other. A handle checked by its word is good when the word equals
//     (generation << 1) | 1. A handle checked by its entry is good when the id was issued (the store publishes each new id with
//     release, after its entry is written) and its store entry's place word holds the handle's
//     generation and a slot (ScoreStore::handle_resident: one acquire load of one word); the
//     entries never move (the store's address room, StoreOptions::fixed_addresses). Both are
//     written under M in the same critical section that makes the block resident in a tier
//     (install) or resident nowhere (drop, release(forget), a finished write-out): the word
//     by publish, the place word's slot by Residency::set_slot (the place word is always
//     written whole, its generation too when the id is reused). So a handle whose block was
//     dropped, forgotten or never issued before the call began is refused, as before. One bad
//     entry fails the call and nothing of it is recorded. Reading the entry's line here also
//     brings it to E's cache for the drain (step 3) that writes it: one line from memory per
//     access.
//  2. [M, tried] E counts its shard as used (AccessLog::join) from its first call. Unless a
//     thread is counted in lock_count.waiters (every other taker of M counts itself while it
//     waits: lock_helping, Impl::lock and relock, a CountedCv's wait; so step(), a full shard, a
//     query, an admission, the mover, a worker's finished copy), or more than one shard is used
//     and step 1 checked by the low-id words (few ids), E tries M (lock_at_call). When M is held
//     by another engine thread applying its batch here (applying_at_call, set under M after it
//     is taken and cleared under M before it is released; E reads it before each try), and more
//     than one shard is used, E keeps trying for up to kAtCallWaitUs from the first try,
//     pausing and helping any drain in parts, and stops when a thread is counted waiting or the
//     flag was clear before two failed tries in a row (M held by a drain, a query, the mover;
//     one is not enough: the holder clears the flag just before it releases M). When it has M,
//     E sets applying_at_call, drains (step 3: every waiting record, its own earlier ones among them,
//     comes first) and applies the batch itself, in order, each record checked again and
//     applied as step 3 applies one, clears the flag and appends nothing. A counted waiter gets
//     M after at most the batches already applying or past their check of the count. Otherwise
//     (M held by another thread, such as the mover, a stats poller, a query or a drain; a thread
//     waiting for M; or no turn within the wait):
//     [E's shard lock] E appends (id, generation, attention) for the whole batch to its
//     shard's active buffer, and takes the batch's number from the log's counter
//     (AccessLog::Batch). Each of the first kShards threads to record in this runtime owns
//     a shard, claimed at its first access (later threads share one, each always the same), so
//     engine threads append in parallel; the shard lock covers the copy of the batch and its
//     number only, and a thread that finds it taken pauses up to kShardLockSpinUs before it
//     blocks (so does the drainer's swap in step 3). When the buffer has no room and more than one shard has been
//     used (other engine threads record, or did), E first waits a bounded while for another
//     thread's drain (step(), a query, the mover) to empty it, trying to append again every
//     few rounds and holding no lock; if no room comes, or E's is the only shard used, E takes
//     M (waiting for it), drains (step 3) and appends again. A batch larger than a buffer is
//     applied at once under M, each record checked as in step 3.
//     While M is taken by a drain applied in parts, E helps apply it instead of waiting (so
//     does a thread waiting for M in step()), and E also helps after an append that found such
//     a drain under way (parallel_drain.cpp).
//  3. [M held] A drain. Every call that takes M to read or decide from policy state (admit,
//     access by key, reference, lookup, move, pin, unpin, release, policy_state, step,
//     checkpoint, stats, validate, close) and the background mover's pass drain first. Every
//     shard's active buffer is swapped for its empty one, every shard lock held at once
//     (AccessLog::take; appenders go on into the other), then the batches are applied in the
//     order of their numbers, each batch's records in order, M held, with the store line of
//     the record 16 ahead prefetched (and, for policies other than LRFU, the index lines of the
//     one 8 ahead) (or, with several engine threads and many
//     records whose shards' batches do not interleave, cut into parts by the shard that
//     recorded them, which the drainer and waiting
//     engine threads apply at once, each its own shard's first: parallel_drain.cpp, whose
//     protocol keeps everything this one states). Each record
//     is checked again: a record
//     whose id now names another key (forgotten and reused) is dropped, since the access came
//     before the forget that erased its state; one whose block was dropped since step 1
//     updates the remembered state only (the access came before the drop); any other is
//     applied exactly as the locked path applies it (note_access: score, step, count, tick,
//     index, hit counters, the promotion queue; with LRFU in every tier, as the LRFU index's
//     split access, to the same effect: apply_in_order_lrfu).
//  4. Order. One thread's accesses are applied in the order it made them and before anything
//     it does next under M (that call drains first). step() drains before it advances the
//     clock, so an access counts at the step in which it was made. Accesses of several
//     threads are applied in an order M could have taken them in: a batch that returned before
//     another thread's batch began is applied first. Appended, it took a smaller number
//     (taken under the shard lock during the append; one counter's order follows
//     happens-before), and every batch taken in a drain was appended before every shard lock
//     was held (step 3), so the later batch is in the same drain or a later one. Applied at the
//     call, it was applied under M before the later batch's call began. A batch applied at the
//     call drains first, so it comes after every batch appended before it began. So
//     policy_state after access shows the access, and every victim choice, promotion
//     decision, stats() and checkpoint sees every access that returned before it began.
//  5. Locks. M, then the shard locks: E holds its own shard's only, never while it waits for
//     M; the drainer, holding M, takes every shard's in shard order (AccessLog::take). Copies run
//     without M (the migration protocol) and never touch a shard, so E never waits for a copy.
//     The block table, pools and indexes are still written under M only: no block is lost or
//     torn, pinned blocks never move and budgets hold as before.
// A synchronous runtime with promotions and more than one tier keeps the locked path: there
// each access may promote at once (promote_sync), which needs M in the caller's thread.
#include "lib/runtime/runtime_impl.hpp"
#include "lib/runtime/test_access.hpp"

#include <cxltier/error.hpp>

#include "lib/core/huge_pages.hpp"
#include "lib/core/prefault.hpp"

#include <algorithm>
#include <iterator>
#include <limits>
#include <new>

namespace cxltier {

// --- AccessLog --------------------------------------------------------------------------------

namespace {
std::atomic<uint64_t> next_log_id{1};
std::atomic<uint64_t> next_thread_token{1};
// The last log this thread recorded in and its shard there (AccessLog::own_shard).
thread_local uint64_t cached_log = 0;
thread_local unsigned cached_shard = 0;
}  // namespace

AccessLog::AccessLog() : id_(next_log_id.fetch_add(1, std::memory_order_relaxed)) {}

uint64_t AccessLog::thread_token() noexcept {
  thread_local const uint64_t token = next_thread_token.fetch_add(1, std::memory_order_relaxed);
  return token;
}

unsigned AccessLog::owned_shard(uint64_t me) const noexcept {
  for (unsigned k = 0; k < kShards; ++k)
    if (owners_[k].load(std::memory_order_relaxed) == me) return k;
  return kShards;
}

unsigned AccessLog::own_shard() noexcept {
  if (cached_log == id_) return cached_shard;
  const uint64_t me = thread_token();
  unsigned k = owned_shard(me);
  for (unsigned c = 0; k == kShards && c < kShards; ++c) {
    uint64_t free = 0;  // a failing compare-and-swap would take the line from every reader
    if (owners_[c].load(std::memory_order_relaxed) == 0 &&
        owners_[c].compare_exchange_strong(free, me, std::memory_order_relaxed))
      k = c;
  }
  if (k == kShards) k = static_cast<unsigned>(me % kShards);  // every shard owned: share one
  cached_log = id_;
  cached_shard = k;
  return k;
}

int AccessLog::thread_shard() const noexcept {
  if (cached_log == id_) return static_cast<int>(cached_shard);
  const unsigned k = owned_shard(thread_token());
  // A thread that owns no shard here has not recorded here, or shares one and has recorded in
  // another log since: -1 either way (a drain's own shard is only a preference).
  return k != kShards ? static_cast<int>(k) : -1;
}

bool AccessLog::append(const uint64_t *handles, const float *attention, size_t n) noexcept {
  if (n == 0) return true;
  if (n > kCapacity) return false;
  Shard &s = shards_[own_shard()];
  lock_spinning(s.mu, kShardLockSpinUs);
  std::lock_guard g(s.mu, std::adopt_lock);
  if (!s.active) {  // a shard's buffers are allocated at its first use (once per shard)
    try {
      for (size_t b = 0; b < 2; ++b) {
        s.bufs[b].reset(new AccessRecord[kCapacity]);
        s.batch_bufs[b].reset(new Batch[kCapacity]);
      }
    } catch (const std::bad_alloc &) {
      for (size_t b = 0; b < 2; ++b) {
        s.bufs[b].reset();
        s.batch_bufs[b].reset();
      }
      return false;  // the caller applies the batch under the runtime's mutex instead
    }
    s.active = s.bufs[0].get();
    s.batches = s.batch_bufs[0].get();
    mark_used(s);
  }
  if (kCapacity - s.n < n) return false;
  AccessRecord *d = s.active + s.n;
  for (size_t i = 0; i < n; ++i) d[i] = AccessRecord::of(handles, attention, i);
  s.n += n;
  // The number is taken under the shard lock, after every batch this thread appended or
  // applied before: the counter's order of numbers follows the order in which batches were made
  // (one atomic's modifications follow happens-before), and take() swaps every shard at once.
  s.batches[s.nbatches++] = {next_batch_.fetch_add(1, std::memory_order_relaxed), static_cast<uint32_t>(s.n)};
  pending_.fetch_add(n, std::memory_order_acq_rel);
  return true;
}

size_t AccessLog::take(Taken *out) noexcept {
  // Every shard is locked, in shard order, before any is swapped (only the drainer holds more
  // than one shard lock, and it holds M: no cycle). A batch appended to a shard locked early
  // cannot then land in the next drain while one appended after it, to a shard locked later,
  // lands in this one. What it costs: while the drainer waits for one shard's append, the
  // shards it holds wait too (an append's copy is microseconds; an appender descheduled
  // mid-copy holds them for its time off the core, as it held its own shard before).
  for (Shard &s : shards_) lock_spinning(s.mu, kShardLockSpinUs);
  size_t taken = 0, records = 0;
  for (unsigned k = 0; k < kShards; ++k) {
    Shard &s = shards_[k];
    if (s.n != 0) {
      out[taken++] = {k, s.active, s.batches, s.nbatches};
      records += s.n;
      const bool first = s.active == s.bufs[0].get();
      s.active = s.bufs[first ? 1 : 0].get();
      s.batches = s.batch_bufs[first ? 1 : 0].get();
      s.n = 0;
      s.nbatches = 0;
    }
    s.mu.unlock();
  }
  if (records != 0) pending_.fetch_sub(records, std::memory_order_acq_rel);
  return taken;
}

// --- Runtime::Impl ----------------------------------------------------------------------------

// Whether prefetching ahead pays: with few states, the store lines, index records and
// entries stay in cache, and the prefetches cost more than they save (measured at 1K
// resident blocks, when the index prefetch was a chain of loads and a virtual call: 28 % of the
// access path's time).
// Set under M whenever ids are issued (ensure_policy_ids); read without M in step 1, where it
// is only a hint.
void Runtime::Impl::note_id_limit() noexcept {
  // About 1.8 MiB of store lines and index records; the ids the residency words cover, so that
  // the handle check reads a word for any id below it (log_access_handles).
  constexpr size_t kPrefetchFromIds = LowIdWords::kIds;
  prefetch_ahead.store(store->id_limit() >= kPrefetchFromIds, std::memory_order_relaxed);
}

bool Runtime::Impl::prefetch_pays() const noexcept { return prefetch_ahead.load(std::memory_order_relaxed); }

bool RuntimeTestAccess::prefetches_ahead(Runtime &rt) { return rt.impl_->prefetch_pays(); }

void RuntimeTestAccess::apply_at_call(Runtime &rt, bool on) { rt.impl_->apply_at_call.store(on, std::memory_order_relaxed); }

uint64_t RuntimeTestAccess::batches_applied_at_call(Runtime &rt) {
  std::lock_guard g(rt.impl_->mu);
  return rt.impl_->batches_at_call;
}

std::unique_lock<std::mutex> RuntimeTestAccess::lock_mutex(Runtime &rt) { return std::unique_lock(rt.impl_->mu); }

std::unique_lock<std::mutex> RuntimeTestAccess::hold_as_at_call(Runtime &rt) {
  std::unique_lock lk(rt.impl_->mu);
  rt.impl_->applying_at_call.store(true, std::memory_order_relaxed);
  return lk;
}

void RuntimeTestAccess::release_as_at_call(Runtime &rt, std::unique_lock<std::mutex> &lk) {
  lk.unlock();
  rt.impl_->applying_at_call.store(false, std::memory_order_relaxed);
}

void RuntimeTestAccess::set_at_call_wait_us(Runtime &rt, unsigned us) {
  rt.impl_->at_call_wait_us.store(us, std::memory_order_relaxed);
}

uint64_t RuntimeTestAccess::at_call_waits(Runtime &rt) { return rt.impl_->at_call_waits.load(std::memory_order_relaxed); }

unsigned RuntimeTestAccess::lock_waiters(Runtime &rt) { return rt.impl_->lock_count.waiters.load(std::memory_order_seq_cst); }

void RuntimeTestAccess::add_lock_waiters(Runtime &rt, int delta) {
  rt.impl_->lock_count.waiters.fetch_add(static_cast<unsigned>(delta), std::memory_order_seq_cst);
}

int RuntimeTestAccess::thread_shard(Runtime &rt) { return rt.impl_->log.thread_shard(); }

bool RuntimeTestAccess::append_unchecked(Runtime &rt, const uint64_t *handles, const float *attention, size_t n) {
  return rt.impl_->log.append(handles, attention, n);
}

namespace {
// apply_in_order where every tier's policy is the LRFU index: each access is the index's split
// access (eviction.hpp), as in a drain in parts, applied by this thread alone and in order. An
// access writes the store line and, the first time its block is pending, appends it to the
// index's pending list, for which prepare_access_own made room first (a flush the list would
// have needed part way comes before the round instead). What every access adds to the index's
// bounds, the runtime's tick and the counters is kept in locals and written once at the end:
// members of the same types may alias the store line, so each store to the line made the
// compiler load and store them again for every access. The accesses are note_access's, in the
// same order: the same states, ticks and counters, and the same blocks pending with the same
// bounds (an access's step is `now` throughout a drain) unless the early flush emptied the list
// and loosened them; so the same victims (the index's search is exact whatever its inner state:
// AccessLog.DrainDecidesAsTheLockedPath holds the two paths to it). bench/README.md, "The serial
// drain as the LRFU index's split access", has what it gained.
template <bool kPrefetch, typename Rec>
void apply_in_order_lrfu(Runtime::Impl &m, size_t n, Rec rec) noexcept {
  constexpr size_t kStoreAhead = 16;
  const size_t ntiers = m.tiers.size();
  LrfuIndex *lrfu[CXLT_MAX_TIERS];
  uint64_t hits[CXLT_MAX_TIERS] = {};
  // The lowest score an indexed access left, per tier; +inf: none yet (an LRFU score is finite).
  double min_score[CXLT_MAX_TIERS];
  std::fill(std::begin(min_score), std::end(min_score), std::numeric_limits<double>::infinity());
  for (size_t t = 0; t < ntiers; ++t) {
    lrfu[t] = m.tiers[t].lrfu;
    lrfu[t]->prepare_access_own(n);  // room in the pending list for every block of the round
  }
  ScoreStore &store = *m.store;
  uint64_t tick = m.tick, accesses = 0;
  for (size_t i = 0; i < n; ++i) {
    if (kPrefetch && i + kStoreAhead < n) m.prefetch_access(rec(i + kStoreAhead).id, false);
    const AccessRecord r = rec(i);
    StoreEntry *const found = store.current(r.id, r.generation);
    if (!found) continue;  // forgotten since, the id reused for another key
    StoreEntry &e = *found;
    m.update_state(e, r.attention, ++tick);
    ++accesses;
    if (e.res.tier < 0) {  // dropped since the handle was checked: the state only
      store.restate(r.id);
      continue;
    }
    const auto t = static_cast<unsigned>(e.res.tier);
    // Written only when set: each store to a line that is still on its way holds a place in
    // the core's store buffer until the line comes, and a full buffer stalls the loop.
    if (e.res.flags & kFlagReleased) e.res.flags = static_cast<uint8_t>(e.res.flags & ~kFlagReleased);
    if ((e.res.flags & (kFlagMoving | kFlagUnindexed)) == 0) {
      if (lrfu[t]->access_own_external(r.id, e.res.policy_stamp)) lrfu[t]->note_pending_prepared(r.id);
      min_score[t] = std::min(min_score[t], e.st.score);
    }
    ++hits[t];
    if (m.promotion_due(e) && m.promote_queue.size() < Runtime::Impl::kPromoteQueueLimit) {
      e.res.flags |= kFlagPromoteQueued;
      m.promote_queue.push_back(r.id);
    }
  }
  m.tick = tick;
  m.accesses += accesses;
  for (size_t t = 0; t < ntiers; ++t) {
    m.tiers[t].hits += hits[t];
    if (min_score[t] != std::numeric_limits<double>::infinity()) lrfu[t]->note_pending_bound(min_score[t], m.now);
  }
}

// Apply n accesses in order (protocol step 3), rec(i) giving the i-th as an AccessRecord. While
// prefetching pays, the store line of the record 16 ahead is fetched meanwhile, and (for
// policies other than LRFU, whose access writes the store line only) the index lines of the one
// 8 ahead.
template <typename Rec>
void apply_in_order(Runtime::Impl &m, size_t n, Rec rec) noexcept {
  if (m.all_lrfu) {
    if (m.prefetch_pays())
      apply_in_order_lrfu<true>(m, n, rec);
    else
      apply_in_order_lrfu<false>(m, n, rec);
    return;
  }
  constexpr size_t kStoreAhead = 16, kIndexAhead = 8;
  if (!m.prefetch_pays()) {
    for (size_t i = 0; i < n; ++i) {
      const AccessRecord r = rec(i);
      m.apply_access(r.id, r.generation, r.attention);
    }
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    if (i + kStoreAhead < n) m.prefetch_access(rec(i + kStoreAhead).id, false);
    if (i + kIndexAhead < n) m.prefetch_access(rec(i + kIndexAhead).id, true);
    const AccessRecord r = rec(i);
    m.apply_access(r.id, r.generation, r.attention);
  }
}
}  // namespace

void Runtime::Impl::apply_records(const AccessRecord *r, size_t n) noexcept {
  apply_in_order(*this, n, [r](size_t i) { return r[i]; });
}

void Runtime::Impl::drain_accesses() noexcept {
  if (!log.pending()) return;
  if (!drain_in_parts()) log.drain([this](unsigned, AccessRecord *r, size_t n) { apply_records(r, n); });
  if (!cfg.synchronous && !promote_queue.empty()) mover_cv.notify_one();
}

bool Runtime::Impl::lock_at_call(bool by_entry) noexcept {
  // A thread waiting for M in lock_helping or lock() (step(), a full shard, a query, the mover)
  // goes first: try_lock would take M ahead of it.
  if (lock_count.waiters.load(std::memory_order_relaxed) != 0) return false;
  // With several engine threads and few ids, every line stays cached, and a batch applied by
  // the thread that checked it moves its lines from the core that applied the other thread's
  // last: the drain (step(), by one thread) keeps them in one core (two threads at 1K resident
  // blocks: 286 against 340 M accesses/s taking turns without waits, a fifth of the rate with
  // them; bench/README.md, "Engine threads take turns applying their batches at the call").
  const bool several = log.shards_in_use() >= 2;
  if (several && !by_entry) return false;
  if (mu.try_lock()) return true;
  // M is taken (protocol step 2). Where another engine thread applies its batch under it, wait
  // for it: a batch left to a drain is applied by another core on lines it must fetch again.
  if (!several) return false;
  at_call_waits.fetch_add(1, std::memory_order_relaxed);
  // The holder clears the flag just before it releases M: one round that found the flag clear
  // and M taken may have fallen between the two, so it takes two such rounds in a row to give
  // up (M held by a drain, a query or the mover: one pause more before the batch is appended).
  unsigned clear = 0;
  for (SpinBudget wait(at_call_wait_us.load(std::memory_order_relaxed));;) {
    const bool at_call = applying_at_call.load(std::memory_order_relaxed);
    if (lock_count.waiters.load(std::memory_order_relaxed) != 0) return false;
    if (help_drain()) continue;  // the holder's drain first is applied in parts: help it
    if (mu.try_lock()) return true;
    clear = at_call ? 0 : clear + 1;
    if (clear == 2 || !wait.spin()) return false;
  }
}

bool Runtime::Impl::log_access_handles(const uint64_t *handles, const float *attention, size_t n) {
  if (cfg.synchronous && cfg.promotion != PromotionRule::never && tiers.size() > 1) return false;
  // Checking a handle takes a few nanoseconds, so the entry 64 on is about one memory latency
  // ahead (measured when the check read a word of its own: 16 on left part of every miss
  // exposed, 24.6 -> 27.8 M accesses/s at 1M resident).
  constexpr size_t kAhead = 64;
  // The batch's own arrays, one line in every 8 handles (16 attention values) 256 on: read in
  // order, but fetched by the core's stream prefetcher only while the line fill buffers have
  // room, which the random prefetches above keep full; an array not in cache (the engine built
  // it a while before) then stalled the check on each of its lines (1.36x at 1M resident blocks,
  // random, with 4,096-handle batches from an 8 MiB set; bench/README.md).
  constexpr size_t kArrayAhead = 256;
  // Which check (step 1): while the store has few ids, every state is cached and the residency
  // words, which only admissions and drops write, stay cached in every engine thread's core;
  // with many, the entry's line comes from memory either way and the drain finds it cached.
  // Either check is exact for any id at any time (an id past the words has its entry checked),
  // so the hint may be stale: it picks the faster, one branch that every handle takes alike.
  const bool by_entry = prefetch_pays();
  const size_t ahead = by_entry ? kAhead : n;
  for (size_t i = 0; i < n; ++i) {  // protocol step 1
    if (by_entry && (i & 7) == 0 && i + kArrayAhead < n) {
      __builtin_prefetch(handles + i + kArrayAhead);
      if (attention != nullptr && (i & 15) == 0) __builtin_prefetch(attention + i + kArrayAhead);
    }
    if (i + ahead < n) store->prefetch_handle(handles[i + ahead]);
    if (attention && !(attention[i] >= 0.0f && attention[i] <= 1.0f))
      fail(CXLT_ERROR_INVALID_ARGUMENT, "access_handles: attention[", i, "] = ", attention[i], " is outside [0, 1]");
    const bool good = by_entry || (handles[i] & 0xffffffffu) >= LowIdWords::kIds ? store->handle_resident(handles[i])
                                                                                 : low_words.resident(handles[i]);
    if (!good)
      fail(CXLT_ERROR_NOT_FOUND, "access_handles: handle[", i, "] = ", handles[i],
           " is stale (its block was dropped or forgotten) or was never issued");
  }
  // Step 2: apply the batch here when M can be had. The store lines the check just read are in
  // this core's cache, and the batch is neither copied into a buffer nor read back
  // (bench/README.md: 1.11x at 1M resident blocks, 1.17x at 1K, one engine thread).
  if (n == 0) return true;  // nothing to record: no shard is claimed, M is not taken
  log.join();
  if (apply_at_call.load(std::memory_order_relaxed) && lock_at_call(by_entry)) {
    std::unique_lock lk(mu, std::adopt_lock);
    applying_at_call.store(true, std::memory_order_relaxed);
    drain_accesses();  // every record waiting first: this thread's earlier ones among them
    ++batches_at_call;
    apply_in_order(*this, n, [handles, attention](size_t i) { return AccessRecord::of(handles, attention, i); });
    if (!cfg.synchronous && !promote_queue.empty()) mover_cv.notify_one();
    applying_at_call.store(false, std::memory_order_relaxed);
    return true;
  }
  if (log.append(handles, attention, n)) {  // step 2
    // A drain under way in another thread goes faster with this one's help
    // (parallel_drain.cpp); with none open, help_drain returns at once.
    help_drain();
    return true;
  }
  // The shard is full. Where engine threads share the work, another thread's drain (step(), a
  // query, the mover) is due soon and empties it: wait a while for that, helping any drain in
  // parts, so that the records are applied by one thread rather than each thread applying the
  // others' (whose state lines then cross between the cores).
  if (wait_for_room(handles, attention, n)) return true;
  // Drain here: take M, helping any drain in parts while it is taken (parallel_drain.cpp).
  std::unique_lock lk(mu, std::defer_lock);
  lock_helping(lk);
  drain_accesses();
  if (log.append(handles, attention, n)) return true;
  // Larger than a buffer (or another thread of the same shard filled it again): apply here.
  apply_in_order(*this, n, [handles, attention](size_t i) { return AccessRecord::of(handles, attention, i); });
  if (!cfg.synchronous && !promote_queue.empty()) mover_cv.notify_one();
  return true;
}

}  // namespace cxltier
