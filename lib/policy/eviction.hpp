// SPDX-License-Identifier: Apache-2.0
// The eviction-policy contract: one instance per tier orders that tier's resident blocks and
// names the next victim. Blocks are named by NodeId, the stable index of their entry in the
// score store, so that a policy keeps per-block data in flat arrays (no per-block allocation).
//
// Contract (every policy, checked by tests/policy/test_policies.cpp):
//  - insert(id) when a block becomes resident in this tier (admitted, or moved in);
//    erase(id, reason) when it leaves; access(id) after its state was updated by a reference.
//  - victim(now, eligible) returns the block to evict next among resident blocks for which
//    eligible(id) is true (pinned blocks are not), without removing it; the caller then erases
//    it with reason evicted. It is exact: the policy's order, with its stated tie-break.
//  - before_admit(id, ...) is called on a miss, before any victim() for that admission and
//    before insert(id): ARC adapts there; others ignore it.
//  - forget(id): the store dropped the id's state (ARC's ghost lists hold ids).
//  - Hot-path members are noexcept and do not allocate once the policy has seen its
//    steady-state size (vectors keep their capacity).
#pragma once

#include <cxltier/key.hpp>
#include <cxltier/policy.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace cxltier {

class LrfuIdRecords;

using NodeId = uint32_t;
constexpr NodeId kNoNode = 0xffffffffu;

enum class EraseReason : uint8_t {
  evicted,   // chosen by victim() to make room (demoted or dropped)
  moved,     // promoted or moved for another reason than this tier's capacity
  released,  // the engine freed its bytes
};

// A predicate over NodeIds, without std::function's allocation.
// warm(id) is a hint: a policy that can tell which blocks its next search will likely ask about
// (those next in line behind the victim it chose) asks for what fn reads of them to be fetched
// into the cache meanwhile.
struct Eligible {
  bool (*fn)(const void *ctx, NodeId id) noexcept = nullptr;
  const void *ctx = nullptr;
  void (*warm_fn)(const void *ctx, NodeId id) noexcept = nullptr;
  bool operator()(NodeId id) const noexcept { return fn == nullptr || fn(ctx, id); }
  void warm(NodeId id) const noexcept {
    if (warm_fn != nullptr) warm_fn(ctx, id);
  }
  static Eligible all() noexcept { return {}; }
};

struct PolicyConfig {
  PolicyKind kind = PolicyKind::lrfu;
  LrfuParams lrfu;
  uint64_t capacity_blocks = 0;  // ARC's c; others ignore it
  unsigned index_buckets = 256;  // LRFU index score buckets
  bool audit = false;            // LRFU: check every victim against the brute-force scan (debug)
  bool huge_pages = true;        // LRFU: its per-id records ask for huge pages
  // LRFU: per-id records shared with the other tiers' indexes (a block is live in one tier at
  // a time: lrfu_id_records.hpp); null, records of its own.
  std::shared_ptr<LrfuIdRecords> lrfu_records;
};

class EvictionPolicy {
public:
  virtual ~EvictionPolicy() = default;
  virtual const char *name() const noexcept = 0;
  // Ids below n may be used from now on (called when the store grows; may allocate).
  virtual void reserve_ids(size_t n) = 0;
  // Address room for ids below n, reserved now and touched only as reserve_ids reaches it: a
  // runtime opened with a bounded store plans its capacity, so that growing up to it later never
  // reallocates, and opening costs no page faults for ids never issued (may allocate).
  virtual void plan_ids(size_t /*n*/) {}
  // The bytes this policy's per-id arrays take for each id below reserve_ids' n (a runtime's
  // open-time memory check): what it keeps for every id, resident here or not. Not counted: the
  // LRFU records a runtime's tiers share (LrfuIdRecords says theirs), and what grows with the
  // blocks resident here only.
  virtual size_t bytes_per_id() const noexcept = 0;
  virtual void insert(NodeId id, const Key &key, const PolicyState &st) noexcept = 0;
  virtual void erase(NodeId id, EraseReason why) noexcept = 0;
  virtual void access(NodeId id, const PolicyState &st) noexcept = 0;
  virtual NodeId victim(uint64_t now, Eligible eligible) noexcept = 0;  // kNoNode if none
  virtual void before_admit(NodeId /*id*/, const Key & /*key*/) noexcept {}
  virtual void forget(NodeId /*id*/) noexcept {}
  // Access applied by several threads at once (the runtime's parallel drain), or by one in
  // rounds (its serial drain, with LRFU in every tier). A policy whose
  // splits_access() is true divides access(id, st) in two:
  //  - access_own(id, st) touches only id's own per-block data, so calls for different ids may
  //    run at the same time in different threads (never two for one id at once). It returns
  //    true when the policy must also hear note_pending(id).
  //  - then, in one thread: note_pending(id) for each id whose access_own returned true, and
  //    note_pending_bound(s, t) with the lowest score and oldest step of every st passed.
  // Together they leave the policy as access(id, st) for each would. Before a round of at most
  // n access_own calls, prepare_access_own(n) (one thread) makes room so that no note_pending
  // has to reorganise the policy.
  virtual bool splits_access() const noexcept { return false; }
  virtual void prepare_access_own(size_t /*n*/) noexcept {}
  virtual bool access_own(NodeId /*id*/, const PolicyState & /*st*/) noexcept { return false; }
  virtual void note_pending(NodeId /*id*/) noexcept {}
  virtual void note_pending_bound(double /*s*/, uint64_t /*t*/) noexcept {}
  // Upkeep that a victim search would otherwise do in one piece (the LRFU index: a rebuild of
  // its heaps, O(resident blocks)), done here in pieces of about `budget` blocks by a caller
  // that holds its lock and hands it over between pieces (the runtime's mover). Returns true
  // while some remains. Between two pieces the policy may be part-way: the access calls
  // (access, access_own, note_pending*, prepare_access_own), insert, erase and size() work on
  // it as it is; victim() and a pending list that must flush complete the upkeep first, so no
  // decision differs from one made without it.
  virtual bool upkeep(size_t /*budget*/) noexcept { return false; }
  // A hint: access(id) follows soon; bring its per-block data toward the cache.
  virtual void prefetch(NodeId /*id*/) const noexcept {}
  virtual size_t size() const noexcept = 0;
  // OPT only: the step at which `id` is referenced next (UINT64_MAX: never).
  virtual void set_next_use(NodeId /*id*/, uint64_t /*next*/) noexcept {}
  // Asked on a miss of `id` (not resident here) when every tier is full: true when the policy
  // would evict the incoming block itself rather than victim(now, eligible), so that it is
  // admitted and evicted at once. OPT: Belady with the incoming block a candidate. Others: false.
  virtual bool bypass(NodeId /*id*/, uint64_t /*now*/, Eligible /*eligible*/) noexcept { return false; }
  // Check internal invariants (tests, debug level 3). Returns an empty string when valid.
  virtual std::string validate() const { return {}; }
};

std::unique_ptr<EvictionPolicy> make_policy(const PolicyConfig &cfg);

}  // namespace cxltier
