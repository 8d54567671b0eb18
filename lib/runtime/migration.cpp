// SPDX-License-Identifier: Apache-2.0
// The migration engine: moving a block's bytes between tiers without ever losing or tearing
// it, by worker threads (background demotion and promotion) or by the calling thread (an
// admission that must make room), plus the background mover that keeps headroom under the
// watermarks and acts on promotion candidates.
//
// The move protocol (block B from tier S, slot s, to tier D):
//  1. [lock held] B is resident in S, unpinned, not moving. A slot d is allocated in D's pool
//     first, so D's budget is charged before any byte moves and can never be exceeded. B is
//     marked moving and taken out of S's policy index (nobody can choose it again). B's
//     entry still says (S, s), and s stays allocated: lookup() still returns the old place,
//     where the bytes are intact.
//  2. [lock released] The bytes are copied s -> d: by D's backend (ext_copy_in), else S's
//     (ext_copy_out), else our copy kernel when both sides are host memory. Nobody writes s
//     (writers must pin, and pin() waits for moving blocks, step 4) and nobody reads d (no
//     entry points at it). With verify_copies, s is hashed before and d after the copy.
//  3. [lock held] Failure: d is freed, B is put back in S's index, the moving mark cleared:
//     B is exactly where it was (counted in migration_failures). Success: the switch happens
//     in one step under the lock: B's entry becomes (D, d), s is freed, B enters D's index
//     with its current state (accesses during the copy updated the state, not an index).
//     Either way waiters are woken.
//  4. pin() and release(forget) of a moving block wait on the condition variable until step
//     3, then act on B where it now is. access() and lookup() never wait: access updates the
//     state, lookup returns the old place (valid until step 3; callers who keep a pointer
//     pin the block).
//  5. An operation that must make room for B before step 1 (move() into a full tier, a
//     synchronous promotion) releases the lock while demotions copy. Meanwhile B is held
//     (kFlagHeld): never a victim, never moved by the mover, release(forget) waits. The hold is
//     not a pin: a pin the engine takes meanwhile is the engine's, and after the hold the
//     operation re-checks B (still resident, not moving, pins == 0) before step 1, or gives up.
// So a resident block is always in exactly one tier as live data (the copy in d is not live
// until the switch), and never in none.
#include "lib/runtime/runtime_impl.hpp"

#include "lib/core/assert.hpp"

#include <cxltier/error.hpp>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace cxltier {

namespace {
uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}
}  // namespace

// Protocol step 1.
MoveJob Runtime::Impl::begin_move(NodeId id, int dst, SlotId dst_slot) {
  StoreEntry &e = (*store)[id];
  cxlt_assert(e.res.tier >= 0 && e.res.tier != dst && e.res.pins == 0 && (e.res.flags & kFlagMoving) == 0);
  const int src = e.res.tier;
  tiers[src].policy->erase(id, dst > src ? EraseReason::evicted : EraseReason::moved);
  e.res.flags |= kFlagMoving;
  ++tiers[src].moving_out;
  ++in_flight;
  ++moves_begun;
  return MoveJob{id, e.res.generation(), src, e.res.slot(), dst, dst_slot, tiers[src].pool->address(e.res.slot()),
                 tiers[dst].pool->address(dst_slot), kNoNode, 0};
}

// Protocol step 2 (no lock held).
cxlt_result_t Runtime::Impl::copy_bytes(const MoveJob &job, uint64_t *ns, std::string *err) {
  const TierRt &S = tiers[job.src], &D = tiers[job.dst];
  cxlt_result_t r = CXLT_OK;
  if (S.no_bytes && D.no_bytes) {
    *ns = 0;
    return CXLT_OK;
  }
  if (job.src_ptr == nullptr || job.dst_ptr == nullptr) {
    *err = "one side has no memory (a null tier next to a real one)";
    return CXLT_ERROR_NOT_SUPPORTED;
  }
  uint64_t before = 0;
  if (cfg.verify_copies) before = XXH3_64bits(job.src_ptr, block_bytes);
  const uint64_t copy_start = now_ns();  // copy time excludes the verification hashing
  backend_set_error("");
  r = D.backend->ops().ext_copy_in(D.backend->state(), job.dst_ptr, job.src_ptr, block_bytes, &S.backend->ops());
  if (r == CXLT_ERROR_NOT_SUPPORTED)
    r = S.backend->ops().ext_copy_out(S.backend->state(), job.dst_ptr, job.src_ptr, block_bytes, &D.backend->ops());
  if (r == CXLT_ERROR_NOT_SUPPORTED && S.host && D.host) {
    copy_block(job.dst > job.src ? kernel_down : kernel_up, job.dst_ptr, job.src_ptr, block_bytes);
    r = CXLT_OK;
  }
  *ns = now_ns() - copy_start;
  if (r != CXLT_OK) {
    *err = backend_last_error();
    if (err->empty()) *err = std::string("copy failed: ") + cxlt_result_string(r);
  } else if (cfg.verify_copies && XXH3_64bits(job.dst_ptr, block_bytes) != before) {
    r = CXLT_ERROR_BACKEND;
    *err = "the copy's checksum does not match the source's";
  }
  return r;
}

// Protocol step 3.
void Runtime::Impl::finish_move(const MoveJob &job, bool ok, uint64_t ns, bool cancelled) {
  StoreEntry &e = (*store)[job.id];
  cxlt_assert(e.res.generation() == job.generation && (e.res.flags & kFlagMoving) && e.res.tier == job.src && e.res.slot() == job.src_slot);
  --tiers[job.src].moving_out;
  --in_flight;
  e.res.flags = static_cast<uint8_t>(e.res.flags & ~kFlagMoving);
  if (!ok) {
    tiers[job.dst].pool->free(job.dst_slot);
    tiers[job.src].policy->insert(job.id, e.key, e.st);
    if (!cancelled) ++failures;
  } else {
    tiers[job.src].pool->free(job.src_slot);
    e.res.tier = static_cast<int8_t>(job.dst);
    e.res.set_slot(job.dst_slot);
    tiers[job.dst].policy->insert(job.id, e.key, e.st);
    pair_bytes[job.src][job.dst] += block_bytes;
    ++pair_blocks[job.src][job.dst];
    pair_ns[job.src][job.dst] += ns;
    if (job.dst > job.src) ++demotions; else ++promotions;
  }
  if (job.partner != kNoNode) finish_swap(job, ok && !cancelled);
  moved_cv.notify_all();
}

bool Runtime::Impl::move_now(std::unique_lock<std::mutex> &lk, NodeId id, int dst, SlotId dst_slot, std::string *err) {
  MoveJob job = begin_move(id, dst, dst_slot);
  uint64_t ns = 0;
  cxlt_result_t r = CXLT_OK;
  err->clear();  // callers reuse one string across moves: no earlier move's message stays
  if (!(tiers[job.src].no_bytes && tiers[job.dst].no_bytes)) {
    lk.unlock();
    try {
      r = copy_bytes(job, &ns, err);
    } catch (const std::exception &ex) {
      // As in worker_loop: the copy counts as failed and the move is finished below, so that
      // the block's moving flag is cleared and nothing waits for it forever.
      r = CXLT_ERROR_BACKEND;
      try {
        *err = ex.what();
      } catch (...) {
      }
    }
    relock(lk);
  }
  finish_move(job, r == CXLT_OK, ns);
  if (r != CXLT_OK) {
    try {
      last_move_error = *err;
    } catch (...) {  // keep the previous message rather than leave the move half-reported
    }
  }
  return r == CXLT_OK;
}

void Runtime::Impl::schedule_move(NodeId id, int dst, SlotId dst_slot, NodeId partner) {
  MoveJob job = begin_move(id, dst, dst_slot);
  if (partner != kNoNode) {
    job.partner = partner;
    job.partner_generation = (*store)[partner].res.generation();
    ++swap_in[dst];
  }
  if (tiers[job.src].no_bytes && tiers[job.dst].no_bytes) {
    finish_move(job, true, 0);
    return;
  }
  // Once close() has begun, no worker may be left to take a job (stop_threads cancelled those
  // queued, and the workers leave an empty queue): the move is cancelled as those were, and
  // the block stays where it was. A move(wait=false) racing close(), or the mover's pass after
  // it handed the lock over, would otherwise leave the block moving for good.
  if (stopping) {
    finish_move(job, false, 0, true);
    return;
  }
  jobs.push_back(job);
  work_cv.notify_one();
}

void Runtime::Impl::wait_moved(std::unique_lock<std::mutex> &lk, const char *what) {
  // `stopping` is written under mu, and stop_threads notifies moved_cv after it: a waiter that
  // read it clear before waiting is woken.
  if (!stopping) moved_cv.wait(lk);
  if (stopping) fail(CXLT_ERROR_CLOSED, what, ": the runtime is closing (a block this call waited for is still in passage)");
}

void Runtime::Impl::worker_loop() {
  std::unique_lock lk = lock();
  while (true) {
    work_cv.wait(lk, [&] { return stopping || !jobs.empty(); });
    if (jobs.empty()) return;  // stopping and drained
    MoveJob job = jobs.front();
    jobs.pop_front();
    lk.unlock();
    uint64_t ns = 0;
    std::string err;
    cxlt_result_t r = CXLT_ERROR_BACKEND;
    try {
      r = copy_bytes(job, &ns, &err);
    } catch (const std::exception &ex) {
      // (bad_alloc while formatting an error, say) The copy counts as failed: the block stays
      // at its old place (protocol step 5), and the worker lives on.
      try {
        err = ex.what();
      } catch (...) {
      }
    }
    relock(lk);
    finish_move(job, r == CXLT_OK, ns);
    if (r != CXLT_OK) {
      try {
        last_move_error = err;
      } catch (...) {  // keep the previous message rather than die
      }
    }
  }
}

// A slot in `tier` for a move the runtime decided on by itself (the background mover, a
// synchronous promotion). A full tier is normal; any other failure (the backend could not supply
// an extent) has no caller to reach, so it is counted in migration_failures and kept as the last
// move error: an injected or real allocation failure is never silent.
cxlt_result_t Runtime::Impl::allocate_for_move(int tier, SlotId *out) {
  const cxlt_result_t r = tiers[tier].pool->allocate(out);
  if (r != CXLT_OK && r != CXLT_ERROR_OUT_OF_TIER_MEMORY) {
    ++failures;
    last_move_error = "tier '" + tiers[tier].name + "' could not supply memory for a move: " + backend_last_error();
  }
  return r;
}

// Would `id` (in tier t > 0) stay out of the next-victim spot of tier t-1? The promotion rule
// asks this; *upper_victim gets that tier's victim (kNoNode if it has none to offer).
bool Runtime::Impl::promote_candidate(NodeId id, NodeId *upper_victim) {
  const StoreEntry &e = (*store)[id];
  const int up = e.res.tier - 1;
  NodeId v = tiers[up].policy->victim(now, eligible());
  *upper_victim = v;
  if (cfg.promotion == PromotionRule::always || v == kNoNode) return true;
  const StoreEntry &ve = (*store)[v];
  switch (cfg.policy) {
    case PolicyKind::lrfu: {
      // Compare scores, not priorities: right after an access a block's recency decay is 0, so
      // its priority is 0 whatever its score, and every touched block (a cold tail block too)
      // would beat every victim. The score says how much attention it has been getting.
      double sb = lrfu_effective_score(e.st.score, now - std::min(now, e.st.last_access), cfg.lrfu);
      double sv = lrfu_effective_score(ve.st.score, now - std::min(now, ve.st.last_access), cfg.lrfu);
      return sb > sv;
    }
    case PolicyKind::lfu: return e.st.accesses > ve.st.accesses;
    case PolicyKind::opt: return opt_next.empty() || opt_next[id] < opt_next[v];
    default: return e.st.tick > ve.st.tick;  // recency policies: the block was referenced later
  }
}

// Synchronous promotion (runtime.synchronous, used by trace replay): move the block up one
// tier now if the rule says so, swapping with the faster tier's victim when it is full and the
// victim can go down into the block's tier.
void Runtime::Impl::promote_sync(std::unique_lock<std::mutex> &lk, NodeId id) {
  StoreEntry &e = (*store)[id];
  if (e.res.tier <= 0 || e.res.pins != 0 || (e.res.flags & (kFlagMoving | kFlagHeld | kFlagUnindexed))) return;
  const int t = e.res.tier, up = t - 1;
  NodeId v = kNoNode;
  if (!promote_candidate(id, &v)) return;
  std::string err;
  SlotId d = kInvalidSlot;
  if (allocate_for_move(up, &d) == CXLT_OK) {
    move_now(lk, id, up, d, &err);
    return;
  }
  if (v == kNoNode) return;
  if (tiers[t].no_bytes && tiers[up].no_bytes) {
    // No bytes to move: exchange the two blocks' places directly.
    StoreEntry &ve = (*store)[v];
    tiers[up].policy->erase(v, EraseReason::evicted);
    tiers[t].policy->erase(id, EraseReason::moved);
    {
      const SlotId slot = e.res.slot();
      e.res.set_slot(ve.res.slot());
      ve.res.set_slot(slot);
    }
    e.res.tier = static_cast<int8_t>(up);
    ve.res.tier = static_cast<int8_t>(t);
    tiers[up].policy->insert(id, e.key, e.st);
    tiers[t].policy->insert(v, ve.key, ve.st);
    ++promotions;
    ++demotions;
    ++pair_blocks[t][up];
    ++pair_blocks[up][t];
    return;
  }
  // Real memory: demote the victim into a free slot of the block's tier (making one there,
  // down the chain, if it is full), then promote. The block is held meanwhile (kFlagHeld, not a
  // pin: the engine's pin count stays its own) so that making room cannot pick it, nor a mover
  // move it; a pin the engine takes meanwhile is seen below and stops the promotion.
  (*store)[id].res.flags |= kFlagHeld;
  auto unhold = [&] {
    (*store)[id].res.flags = static_cast<uint8_t>((*store)[id].res.flags & ~kFlagHeld);
    moved_cv.notify_all();  // release(forget) waits for a held block
  };
  bool ok = false;
  try {
    SlotId dv = kInvalidSlot;
    if (allocate_for_move(t, &dv) == CXLT_ERROR_OUT_OF_TIER_MEMORY && make_room(lk, t, RoomFor::needed)) {
      if (allocate_for_move(t, &dv) != CXLT_OK) dv = kInvalidSlot;
    }
    const StoreEntry &ve = (*store)[v];
    if (dv != kInvalidSlot) {
      // Still a victim the index may give up: while the lock was released another call may have
      // pinned, moved, held or taken it out of its index (a burst's room: kFlagUnindexed).
      if (ve.res.tier == up && eligible_fn(this, v)) {
        ok = move_now(lk, v, t, dv, &err);
      } else {
        tiers[t].pool->free(dv);  // the victim went elsewhere while the lock was released
      }
    }
  } catch (...) {
    unhold();
    throw;
  }
  unhold();
  const StoreEntry &after = (*store)[id];
  if (ok && after.res.tier == t && after.res.pins == 0 && !(after.res.flags & kFlagMoving) &&
      allocate_for_move(up, &d) == CXLT_OK)
    move_now(lk, id, up, d, &err);
}

// One pass of the background mover: promotion candidates first (they are what the engine
// uses now), then headroom under the watermarks, bottom tier first so that demotions from
// above find room, then the tiers' order (reconcile, placement.cpp). A tier's occupancy for the
// watermarks leaves out the blocks being copied out of it and the swap demotions whose
// partner is about to leave it (swap_in): both are slots about to be freed.
void Runtime::Impl::mover_pass(std::unique_lock<std::mutex> &lk) {
  const uint64_t pass = ++mover_passes;
  const uint64_t work_before = moves_begun + drops;
  // The upkeep a tier's index would do in one piece at this pass's first victim search or
  // insert (the LRFU index rebuilds its heaps when most of its blocks were accessed since:
  // 45-170 ms at 620K blocks, with every step() waiting), made in pieces, for the tiers the pass
  // searches or inserts into (the tiers above a promotion, those over the high watermark and
  // the tiers below them):
  //  1. The mover, holding mu, has the tier's policy do one piece: kUpkeepPiece blocks placed in
  //     their buckets (0.1-0.3 ms), or heaps put in order until about that many entries are
  //     (a crowded bucket's heap in one piece: up to about 10 ms at 620K blocks).
  //  2. Between two pieces, pass_lock hands mu to a thread counted waiting for it (its own
  //     numbered protocol, parallel_drain.cpp); any other thread may take mu then as well.
  //  3. While the rebuild is part-way, the access calls (a drain), insert and erase (a worker
  //     finishing a move, an admission) use the index as it is: a block placed already
  //     becomes pending again, one not yet placed is placed as it is later. A victim search
  //     or a full pending list completes the rebuild first, in that thread, so no decision is
  //     made on a part-way index.
  //  4. The mover assumes nothing read before a hand-over: the index keeps its own cursor, and
  //     the watermark loop reads the tier's occupancy after the upkeep.
  //  5. The engine's accesses during one tier's pieces can bring another tier's index to its
  //     rule (7/8 of its blocks pending) after that tier was checked; its search would then
  //     rebuild in one piece (30-77 ms at 620K blocks, measured). So the tiers are checked in
  //     rounds until a round begins no rebuild: that round hands the lock over to no one, and
  //     the searches follow it. After 4 rounds the mover goes on regardless (a rebuild's own
  //     hand-overs can bring its tier back to a rule; then a search may rebuild in one piece).
  constexpr size_t kUpkeepPiece = size_t{1} << 10;
  auto upkeep = [&](int t) {
    while (tiers[t].policy->upkeep(kUpkeepPiece)) pass_lock(lk);
  };
  auto upkeep_tiers = [&](int first, int last) {
    for (int round = 0; round < 4; ++round) {
      bool began = false;
      for (int t = first; t <= last; ++t) {
        if (!tiers[t].policy->upkeep(kUpkeepPiece)) continue;
        began = true;
        pass_lock(lk);
        upkeep(t);
      }
      if (!began) break;
    }
  };
  if (!promote_queue.empty() && last_tier() > 0) upkeep_tiers(0, last_tier() - 1);
  size_t budget = 64;
  size_t n = std::min(budget, promote_queue.size());
  std::vector<NodeId> &retry = mover_retry;  // kept between passes: no allocation once grown
  retry.clear();
  for (size_t i = 0; i < n; ++i) {
    NodeId id = promote_queue[i];
    StoreEntry &e = (*store)[id];
    e.res.flags = static_cast<uint8_t>(e.res.flags & ~kFlagPromoteQueued);
    if (e.res.tier <= 0 || e.res.pins != 0 || (e.res.flags & (kFlagMoving | kFlagHeld | kFlagUnindexed))) continue;
    NodeId v = kNoNode;
    if (!promote_candidate(id, &v)) continue;
    const int t = e.res.tier, up = t - 1;
    SlotId d = kInvalidSlot;
    const cxlt_result_t r = allocate_for_move(up, &d);
    if (r == CXLT_OK) {
      schedule_move(id, up, d);
    } else if (r == CXLT_ERROR_OUT_OF_TIER_MEMORY && v != kNoNode) {
      // Make room above by sending its victim down into this tier, then try again next pass.
      SlotId dv = kInvalidSlot;
      if (allocate_for_move(t, &dv) == CXLT_OK) {
        schedule_move(v, t, dv);
        e.res.flags |= kFlagPromoteQueued;
        retry.push_back(id);
      }
    }
  }
  promote_queue.erase(promote_queue.begin(), promote_queue.begin() + static_cast<std::ptrdiff_t>(n));
  promote_queue.insert(promote_queue.end(), retry.begin(), retry.end());

  for (int t = last_tier(); t >= 0; --t) {
    TierRt &tr = tiers[t];
    const double max = tr.pool->max_slots();
    auto staying = [&] { return tr.pool->slots_used() - tr.moving_out - swap_in[t]; };
    if (staying() <= cfg.high_watermark * max) continue;
    upkeep_tiers(t, std::min(t + 1, last_tier()));  // the tier below takes the demotions (inserts)
    const uint32_t target = static_cast<uint32_t>(cfg.low_watermark * max);
    unsigned moved = 0;
    while (staying() > target && moved < cfg.migration_batch) {
      NodeId v = tr.policy->victim(now, eligible());
      if (v == kNoNode) break;
      if (t == last_tier()) {
        policy_drop(lk, v, /*wait=*/false);  // written out by the remote tier's threads, if on
      } else {
        SlotId d = kInvalidSlot;
        if (allocate_for_move(t + 1, &d) != CXLT_OK) break;
        schedule_move(v, t + 1, d);
      }
      ++moved;
    }
  }

  // The order: scanned when a wait_idle waits for it; otherwise again at the next pass when the
  // last scan moved blocks, else 10 ms later, and never sooner than 4 times the last
  // reconcile's duration (scan, pick and moves) after its start (the scan reads every resident
  // block's state under the lock: at most a quarter of the mover's time, and of the lock's,
  // goes to it). reconcile releases the
  // lock while it picks: a scan taken while copies were queued or in flight left their blocks
  // out, and those may have landed meanwhile, so only a scan taken with none, and not stale
  // (reconcile_stale), can make the pass quiet.
  const uint64_t t_ns = now_ns();
  bool scanned = false, scan_whole = false;
  if (settle_waiters > 0 || t_ns >= next_reconcile_ns) {
    scanned = true;
    const bool none_moving = jobs.empty() && in_flight == 0;
    reconcile_again = reconcile(lk, std::max<size_t>(1, cfg.migration_batch) * (tiers.size() - 1)) > 0;
    scan_whole = none_moving && !reconcile_stale;
    last_scan_whole = scan_whole;
    const uint64_t took = now_ns() - t_ns;
    next_reconcile_ns = t_ns + std::max<uint64_t>(reconcile_again ? 0 : 10'000'000, 4 * took);
  }
  const bool idle = moves_begun + drops == work_before && promote_queue.empty() && jobs.empty() && in_flight == 0;
  // wait_idle(0) polls idle_pass: a pass that did not scan stands on the last scan, which must
  // have been whole too.
  if (idle && !reconcile_again && last_scan_whole) idle_pass = pass;
  if (idle && scanned && scan_whole) {
    quiet_pass = pass;
    moved_cv.notify_all();  // wait_idle waits for such a pass
  }
}

void Runtime::Impl::mover_loop() {
  std::unique_lock lk = lock();
  while (!stopping) {
    mover_cv.wait_for(lk, std::chrono::milliseconds(2));
    if (stopping) break;
    drain_accesses();  // the pass decides from policy state: every recorded access first
    try {
      mover_pass(lk);
    } catch (const std::exception &ex) {
      // A worker never dies silently: report and go on (the next pass retries).
      std::fprintf(stderr, "cxltier: background mover: %s\n", ex.what());
    }
    if (settle_waiters > 0) moved_cv.notify_all();  // wait_idle counts passes
  }
}

void Runtime::Impl::start_threads() {
  if (cfg.synchronous) return;
  for (unsigned i = 0; i < cfg.migration_threads; ++i) workers.emplace_back([this] { worker_loop(); });
  mover = std::thread([this] { mover_loop(); });
}

void Runtime::Impl::stop_threads() {
  {
    const std::unique_lock lk = lock();
    stopping = true;
    // Queued moves that no worker has started are cancelled: each block stays where it was.
    while (!jobs.empty()) {
      MoveJob job = jobs.front();
      jobs.pop_front();
      finish_move(job, false, 0, true);
    }
  }
  work_cv.notify_all();
  mover_cv.notify_all();
  // Calls waiting for blocks in passage or for the tiers to settle (wait_out_passage,
  // wait_settled) end at close(): each wait's predicate reads `stopping`.
  moved_cv.notify_all();
  if (mover.joinable()) mover.join();
  for (std::thread &w : workers)
    if (w.joinable()) w.join();
  workers.clear();
}

void Runtime::Impl::write_checkpoint_now(std::unique_lock<std::mutex> &lk) {
  CheckpointMeta meta{now, tick, cfg.lrfu.alpha, cfg.lrfu.beta, cfg.lrfu.mode};
  auto states = store->snapshot();
  lk.unlock();
  try {
    std::lock_guard ck(checkpoint_mu);
    // Two callers may race here; never let an older snapshot replace a newer one.
    if (meta.current_tick >= checkpoint_written_tick) {
      ScoreStore::write_checkpoint(cfg.store_path, meta, states);
      checkpoint_written_tick = meta.current_tick;
    }
  } catch (...) {
    relock(lk);
    throw;
  }
  relock(lk);
}

// --- Write-out to the remote tier (lib/runtime/remote.hpp) ----------------------------------
// A block the policy drops from the last local tier, with the remote tier on, is moved to "the
// remote tier" by the same rules as a move between tiers (block B in tier S, slot s):
//  W1. [lock held] B leaves S's policy index and is marked moving. Its entry still says (S, s)
//      and s stays allocated (S's budget still counts it): lookup() returns s, whose bytes are
//      intact; pin() and release(forget) wait (step 4 above); nobody can choose B again.
//  W2. [lock released] The remote client sends s's bytes to the server (sendmsg from the slot,
//      no copy), in the calling thread (make_room) or in one of its own (the background mover).
//  W3. [lock held] Whatever the outcome, s is freed and B is resident nowhere, its policy state
//      kept in the store: the drop the policy decided, counted in `drops`. A write that failed
//      (timeout, server down, -OOM) is counted in remote failures; B is then only a miss later.
// make_room waits for the write (W2 in the admitting thread, bounded by remote.deadline_ms):
// the room it needs is made by this very drop, and writing out a block worth keeping matters
// more than the few milliseconds one 5 MiB SET costs; the background mover keeps admissions
// away from this path by keeping headroom under the watermarks. Blocks below
// remote.write_threshold, and drops beyond remote.max_pending write-outs in flight, are
// dropped without a write (counted in the remote `skipped` counter).
void Runtime::Impl::policy_drop(std::unique_lock<std::mutex> &lk, NodeId id, bool wait) {
  StoreEntry &e = (*store)[id];
  if (!remote || tiers[e.res.tier].no_bytes) {
    drop(id);
    return;
  }
  const double score = lrfu_effective_score(e.st.score, now - std::min(now, e.st.last_access), cfg.lrfu);
  if (score < remote->write_threshold()) {
    remote->note_skipped();
    drop(id);
    return;
  }
  const Key key = e.key;
  WriteOut w = begin_writeout(id);
  if (wait) {
    lk.unlock();
    bool ok = remote->store(key, w.ptr, block_bytes);
    relock(lk);
    finish_writeout(w, ok);
    return;
  }
  bool queued = remote->store_async(key, w.ptr, block_bytes, [this, w](bool ok) {
    const std::unique_lock g = lock();
    finish_writeout(w, ok);
  });
  if (!queued) {
    remote->note_skipped();
    finish_writeout(w, false);
  }
}

// Step W1.
WriteOut Runtime::Impl::begin_writeout(NodeId id) {
  StoreEntry &e = (*store)[id];
  cxlt_assert(e.res.tier >= 0 && e.res.pins == 0 && (e.res.flags & kFlagMoving) == 0);
  tiers[e.res.tier].policy->erase(id, EraseReason::evicted);
  e.res.flags |= kFlagMoving;
  ++tiers[e.res.tier].moving_out;
  ++in_flight;
  ++moves_begun;
  return WriteOut{id, e.res.generation(), e.res.tier, e.res.slot(), tiers[e.res.tier].pool->address(e.res.slot())};
}

// Step W3.
void Runtime::Impl::finish_writeout(const WriteOut &w, bool written) {
  (void)written;  // the remote client counts writes and failures
  StoreEntry &e = (*store)[w.id];
  cxlt_assert(e.res.generation() == w.generation && (e.res.flags & kFlagMoving) && e.res.tier == w.tier && e.res.slot() == w.slot);
  --tiers[w.tier].moving_out;
  --in_flight;
  cxlt_result_t r = tiers[w.tier].pool->free(w.slot);
  cxlt_assert(r == CXLT_OK);
  (void)r;
  e.res.tier = -1;
  e.res.set_slot(kInvalidSlot);
  e.res.flags = static_cast<uint8_t>(e.res.flags & ~(kFlagMoving | kFlagReleased | kFlagPromoteQueued));
  store->set_resident(w.id, false);
  low_words.publish(w.id, e.res.generation(), false);
  ++drops;
  moved_cv.notify_all();
}

}  // namespace cxltier
