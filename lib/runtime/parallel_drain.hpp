// SPDX-License-Identifier: Apache-2.0
// A drain of the access log applied by more than one thread: each shard's records are cut into
// parts (a block recorded by more than one part has its later records applied after every
// part, in drain order), and the thread that drains (holding the runtime's mutex) and engine
// threads that would otherwise wait for that mutex apply the parts at the same time, each its
// own shard's first. The protocol is the numbered comment in parallel_drain.cpp.
#pragma once

#include "lib/runtime/access_log.hpp"

#include <cxltier/cxltier.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace cxltier {

struct ParallelDrain {
  // A shard's records are cut by position into this many parts (segments), so that a thread
  // that comes late still finds some of its own and another thread can take the rest.
  static constexpr unsigned kShardParts = 4;
  static constexpr unsigned kParts = AccessLog::kShards * kShardParts;
  static_assert(kParts <= 32, "the claims are one bit a part of a 32-bit word");
  // The records moved out of the parts (below), applied by the drainer alone once every other
  // part is done.
  static constexpr unsigned kLater = kParts;
  // A drain of fewer records is applied by the draining thread alone: placing the records and
  // handing out parts costs more than a second thread saves.
  static constexpr size_t kMinRecords = 2048;

  // A block's records in the part that holds its first record in drain order are applied by
  // that part; its records in any later part are moved to kLater (after every part, in drain
  // order), or all of them are, when its bit was set by another block. The drainer finds the blocks
  // an earlier part recorded in a bitmap of 2^kSeenLog2 bits (32 KiB, in the first-level
  // cache), one bit a block by a hash of its id: no false negatives, and a record whose bit
  // another block set is moved too (about 1 % of the records of a drain of 6,000; every record
  // of its block then gets the same answer, so the order holds). A table of each block's first
  // part, 64K slots of 8 B, cost 1.5 ns a record and 10-15 % of two threads' rate at 1M
  // resident blocks. Cleared after each drain.
  static constexpr unsigned kSeenLog2 = 18;
  static constexpr size_t kSeenWords = (size_t{1} << kSeenLog2) / 64;
  // AccessRecord::mark of a record moved to kLater, in the part it came from (the drainer
  // writes nothing else in the shards' buffers, whose lines stay in the cache of the thread that
  // appended them). The copy in kLater holds its place in drain order there.
  static constexpr uint32_t kMoved = 1u << 31;

  // What step 5 must do for a record, written by the thread that applied it at the record's
  // place in `outcome` (never in the record: the drainer has read the record's line, and a write
  // there would take the line back from the drainer's cache for each record): the tier's policy
  // must hear note_pending(id); the block joins the promotion queue; the tier the block is in.
  static constexpr uint16_t kNotePending = 1u << 15;
  static constexpr uint16_t kPromote = 1u << 14;
  static constexpr uint16_t kApplied = 1u << 13;
  // Instead of the bits above for a record of a block resident nowhere: step 5 applies its
  // state update, since the store's forget order must hear of it and only the drainer writes it.
  static constexpr uint16_t kStateOnly = 1u << 12;
  static constexpr uint16_t kTierMask = 0xffu;
  static_assert(CXLT_MAX_TIERS <= kTierMask + 1, "a tier's rank fits the outcome's low byte");

  // One part: its records, and what they added, summed by the draining thread afterwards.
  struct alignas(64) Part {
    AccessRecord *records = nullptr;  // in a shard's buffer (or `later`), in drain order
    uint32_t n = 0;
    uint32_t first = 0;  // the place in drain order of records[0]; in kLater each record's own
    uint64_t accesses = 0;
    uint64_t hits[CXLT_MAX_TIERS] = {};
    double min_score[CXLT_MAX_TIERS] = {};  // lowest score an indexed access left, per tier
    bool indexed[CXLT_MAX_TIERS] = {};      // some access of the part went to the tier's policy
    bool promotes = false;                  // some record of the part queues a promotion
    uint32_t notes = 0;                     // records of the part that need note_pending
    uint32_t states_only = 0;               // records of the part flagged kStateOnly
  };
  // The place in drain order of a part's i-th record: the part's first place plus i, or, in
  // kLater (`later`), the place the record was moved from.
  static uint32_t place_of(const Part &part, bool later, uint32_t i) noexcept {
    return later ? part.records[i].mark : part.first + i;
  }

  // kLater's records, in drain order. A record's tick is tick_base + 1 + its place in drain
  // order. Allocated at the first parallel drain, as are the arrays below.
  std::unique_ptr<AccessRecord[]> later;
  // Step 5's scratch, by place in drain order: the block a record queues for promotion, or
  // kNoNode (so that the promotion queue gets them in the order the accesses were made).
  std::unique_ptr<NodeId[]> promote_at;
  // Step 3's outcome of each record, by place in drain order (kApplied and the bits beside it,
  // kStateOnly, or 0: refused). Each part writes the places of its own records.
  std::unique_ptr<uint16_t[]> outcome;
  std::unique_ptr<uint64_t[]> seen;  // kSeenWords words (see kSeenLog2)
  Part parts[kParts + 1];              // by shard, then kLater
  uint64_t tick_base = 0;

  // Spin budgets, in microseconds (SpinBudget, spin_wait.hpp): a thread waiting for the
  // runtime's mutex before it blocks (lock_helping); a full shard waiting for another thread's
  // drain before it drains itself (wait_for_room); a helper waiting for its own parts to be
  // placed before it takes others or leaves; the drainer waiting for helpers before it yields.
  static constexpr unsigned kLockSpinUs = 100, kRoomWaitUs = 40, kHelperWaitUs = 20, kDrainWaitUs = 50;

  std::atomic<bool> open{false};  // parts may be claimed (protocol step 2)
  // Bit p set: part p has records in this drain (written before `open`).
  uint32_t expected = 0;
  // Bit p set: part p's records are placed, and it may be claimed (the drainer sets them in
  // drain order, with release, while helpers claim).
  std::atomic<uint32_t> ready{0};
  // Bit p set: part p is claimed. A thread claims its own shard's parts first, then any: the
  // drainer the lowest, helpers the highest.
  std::atomic<uint32_t> claimed{0};
  std::atomic<unsigned> done{0};     // parts applied
  std::atomic<unsigned> helpers{0};  // threads inside help_drain() (step 3)

  // [runtime mutex] Tests: the drainer claims its parts as helpers do, the highest first (its
  // own shard's, then the others': against drain order).
  bool reverse_claims = false;
  unsigned drainer_first = 0;  // [runtime mutex] the first part the drainer claimed in the last drain (tests)
  uint64_t drains = 0;                      // drains applied in parts (runtime mutex)
  // Drains that had the records for parts, applied serially: their shards' batches interleaved
  // (runtime mutex).
  uint64_t interleaved = 0;
  std::atomic<uint64_t> parts_helped{0};    // parts applied by a helper (tests read it)
};

// What docs/runtime.md states a drain in parts allocates, once: kLater's records, the promotion
// and outcome places, and the bitmap, for every record one drain can take.
static_assert(AccessLog::kShards * AccessLog::kCapacity * (sizeof(AccessRecord) + sizeof(NodeId) + sizeof(uint16_t)) +
                  ParallelDrain::kSeenWords * sizeof(uint64_t) ==
              736 * 1024);

}  // namespace cxltier
