// SPDX-License-Identifier: Apache-2.0
// The tiered runtime, C++ API (the C ABI in cxltier.h is a thin layer over it). It keeps KV
// blocks in per-tier pools of real memory under per-tier budgets, orders each tier by the
// configured eviction policy, admits new blocks into the fastest tier with room, demotes and
// drops the coldest, promotes hot blocks, moves bytes asynchronously, and keeps every block's
// policy state in the identity-keyed score store.
//
// Thread-safe: every member may be called from several threads at once. Errors are thrown as
// cxltier::Error with the C ABI's result code.
#pragma once

#include <cxltier/config.hpp>
#include <cxltier/cxltier.h>
#include <cxltier/key.hpp>
#include <cxltier/topology.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cxltier {

struct RuntimeTestAccess;  // the tests' way in (lib/runtime/test_access.hpp)

struct Block {
  void *data = nullptr;  // nullptr on the null backend
  size_t bytes = 0;
  int tier = -1;         // rank of the tier that holds it
  uint64_t handle = 0;   // for access_handles(): no hashing
};

// What reference() found (trace replay).
struct ReferenceResult {
  int hit_tier = -1;        // tier that held the block, -1 on a miss
  bool admitted = false;    // a miss that was admitted (OPT may decline)
  bool restored = false;    // the admission restored a stored state
  bool remote_hit = false;  // a miss that the remote tier served (its bytes fetched, not a miss)
};

class CXLT_API Runtime {
public:
  // Resolve the tiers against the topology, create backends and pools, load the score-store
  // checkpoint if configured, start the migration threads. Throws Error with CXLT_ERROR_CONFIG
  // (naming the field), _TOPOLOGY, _BACKEND, _IO or _CORRUPT; nothing is left running.
  static std::unique_ptr<Runtime> open(const RuntimeConfig &config);
  ~Runtime();  // close() if not yet done (a failed checkpoint printed to stderr), free every tier's memory
  // Stop the migration threads and the remote tier, then write the final score-store checkpoint
  // if persistence is on. Throws Error (CXLT_ERROR_IO) when that checkpoint cannot be written, so
  // the caller learns of it; the previous checkpoint file is left intact. Only destruction may
  // follow; a second close() does nothing (in another thread, it returns once the first is
  // done). A call in progress in another thread that waits for a
  // block in passage (being moved, admitted or held by another call) then fails with
  // CXLT_ERROR_CLOSED (an admission beside blocks in passage, with CXLT_ERROR_OUT_OF_TIER_MEMORY
  // saying the runtime is closing), and a move it schedules is cancelled: the block stays put.
  void close();
  Runtime(const Runtime &) = delete;
  Runtime &operator=(const Runtime &) = delete;

  // *placed (optional) is true when this call gave the block a new slot: its bytes are
  // undefined and the engine must fill them; false when it was resident already. With
  // `pin`, the block is returned pinned (admission and pin in one step, so nothing can move
  // or drop it in between: what an engine wants before writing the KV).
  Block admit(const Key &key, bool *placed = nullptr, bool pin = false);
  void access(const Key *keys, const float *attention, size_t n);
  void access_handles(const uint64_t *handles, const float *attention, size_t n);
  bool lookup(const Key &key, Block *out);
  // Move a resident block to tier `tier` now (an engine's prefetch or placement hint; the
  // bandwidth benchmark). With `wait`, returns when the copy is done (the block's new place);
  // without, the move is queued for the migration workers and the block's current place is
  // returned. Makes room in the target tier by the usual cascade when it is full. Throws
  // NOT_FOUND (not resident), BUSY (pinned), INVALID_ARGUMENT (no such tier), BACKEND (the copy
  // failed: the block stays where it was).
  Block move(const Key &key, int tier, bool wait);
  Block pin(const Key &key);
  void unpin(const Key &key);
  void release(const Key &key, bool forget);
  bool policy_state(const Key &key, cxlt_policy_state_t *out);
  void step();
  uint64_t current_step() const;
  // No copy queued or in flight and the tiers' order reconciled (a mover pass begun after the
  // call found nothing to do); false past the timeout. 0 polls (docs/runtime.md, "Placement quality").
  bool wait_idle(int64_t timeout_ms);
  void checkpoint();

  // One reference of a trace: a hit updates the block's state; a miss admits it (its state
  // restored or reset by the persist setting). `next_use` is the index of the block's next
  // reference (UINT64_MAX: never), used by OPT only. The clock is advanced by step().
  ReferenceResult reference(const Key &key, float attention, uint64_t next_use);
  // reference(keys[i], attention[i], next_use[i]) for every i in order (a request's blocks),
  // with the same results and states, under one lock acquisition, the store lookups of later
  // references prefetched while earlier ones run. attention (null: 1.0 each) and next_use
  // (null: UINT64_MAX each) are checked first: an attention outside [0, 1] throws before any
  // reference is taken, naming its position. out receives n results.
  void reference_many(const Key *keys, const float *attention, const uint64_t *next_use, size_t n,
                      ReferenceResult *out);

  // Batch calls (lib/runtime/batch.cpp). Each checks the whole batch first and applies none of
  // it on an error (the thrown Error names the position of the entry that was wrong).
  // admit_batch: admit(keys[i], placed, pin) for every i, in order; out[i] gets each block and
  // placed[i] (optional) whether its bytes are new. Needs room for every key resident nowhere:
  // if the tiers cannot hold them all (pinned blocks), nothing is admitted and nothing pinned.
  void admit_batch(const Key *keys, size_t n, bool pin, Block *out, bool *placed);
  // The length of the longest prefix of keys resident in some tier; out[0 .. matched) get the
  // blocks. With `pin`, every block of the matched prefix is pinned in one step under the lock
  // (none can be dropped or moved in between). With `fetch` and the remote tier on, the blocks
  // after the local prefix that the remote tier holds are admitted and filled from it (pinned
  // with `pin`), extending the prefix; without the remote tier, `fetch` changes nothing.
  size_t prefix_lookup(const Key *keys, size_t n, bool pin, bool fetch, Block *out);
  // release(keys[i], forget) for every i: every key resident and unpinned (and, without
  // forget, not released before), no key twice; else nothing is released.
  void release_batch(const Key *keys, size_t n, bool forget);
  // unpin(keys[i]) for every i: a key may appear as often as it is pinned; else nothing changes.
  void unpin_batch(const Key *keys, size_t n);

  // The counters and the placement measure (a scan of every remembered state).
  cxlt_stats_t stats() const;
  // As stats(); `measure_placement` false skips the scan and reports the last measure taken
  // (zeros before one).
  cxlt_stats_t stats(bool measure_placement) const;
  std::string stats_json() const;
  size_t tier_count() const;
  cxlt_tier_info_t tier_info(size_t rank) const;
  // The pair's copy method ("memcpy", "nt-avx2", "backend:emulated", "none" for null tiers).
  std::string copy_method(size_t from, size_t to) const;
  const RuntimeConfig &config() const;
  const Topology &topology() const;
  // Check every invariant: each block in exactly one tier or none, pool and index counts,
  // budgets. Returns "" when valid. Takes the lock; O(blocks).
  std::string validate() const;

  struct Impl;

private:
  friend struct RuntimeTestAccess;
  explicit Runtime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cxltier
