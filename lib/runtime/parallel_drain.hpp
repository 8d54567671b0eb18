// SPDX-License-Identifier: Apache-2.0
// A drain of the access log applied by more than one thread: the records are sorted into parts
// by block, and the thread that drains (holding the runtime's mutex) and engine threads that
// would otherwise wait for that mutex apply the parts at the same time. The protocol is the
// numbered comment in parallel_drain.cpp.
#pragma once

#include "lib/runtime/access_log.hpp"

#include <cxltier/cxltier.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace cxltier {

struct ParallelDrain {
  // Parts a drain is cut into: enough that two threads finish together, few enough that a
  // part's records are hundreds, not a handful.
  static constexpr unsigned kParts = 16;
  // A drain of fewer records is applied by the draining thread alone: sorting and handing out
  // parts costs more than a second thread saves.
  static constexpr size_t kMinRecords = 2048;
  // Blocks in runs of 8 consecutive ids go to one part, so that two threads never write the
  // same cache line of a per-id array of 8- to 64-byte elements (a run fills whole lines of
  // them; the arrays start on a line). LRFU's access writes only the store line (64 bytes: one
  // block's own).
  static unsigned part_of(NodeId id) noexcept { return (id >> 3) % kParts; }

  // Bits of AccessRecord::generation once its record is applied (the generation is not needed
  // after the check): the tier's policy must hear note_pending(id); the block joins the
  // promotion queue; the tier the block is in.
  static constexpr uint32_t kNotePending = 1u << 31;
  static constexpr uint32_t kPromote = 1u << 30;
  static constexpr uint32_t kApplied = 1u << 29;
  // Set instead of the bits above on a record of a block resident nowhere: step 5 applies its
  // state update, since the store's forget order must hear of it and only the drainer writes it.
  static constexpr uint32_t kStateOnly = 1u << 28;
  static constexpr uint32_t kTierMask = 0xffu;

  // What one part's records added, summed by the draining thread afterwards.
  struct alignas(64) Part {
    uint32_t begin = 0, end = 0;  // its records in `records`
    uint64_t accesses = 0;
    uint64_t hits[CXLT_MAX_TIERS] = {};
    double min_score[CXLT_MAX_TIERS] = {};  // lowest score an indexed access left, per tier
    bool indexed[CXLT_MAX_TIERS] = {};      // some access of the part went to the tier's policy
    bool promotes = false;                  // some record of the part queues a promotion
    uint32_t notes = 0;                     // records of the part that need note_pending
    uint32_t states_only = 0;               // records of the part flagged kStateOnly
  };

  // Every record of one drain, sorted by part (stable: each part's in drain order).
  // AccessRecord::unused holds the record's place in drain order (its tick is tick_base + 1 +
  // that place). Allocated at the first parallel drain.
  std::unique_ptr<AccessRecord[]> records;
  // Step 5's scratch, by place in drain order: the block a record queues for promotion, or
  // kNoNode (so that the promotion queue gets them in the order the accesses were made).
  std::unique_ptr<NodeId[]> promote_at;
  Part parts[kParts];
  uint64_t tick_base = 0;

  std::atomic<bool> open{false};        // parts may be claimed (protocol step 2)
  // Parts not yet claimed: [front, back), front in the low 16 bits. The drainer claims from the
  // front and helpers from the back, so that each thread tends to apply the same parts, whose
  // lines its cache holds from the drains before.
  std::atomic<uint32_t> claims{0};
  std::atomic<unsigned> done{0};        // parts applied
  std::atomic<unsigned> helpers{0};     // threads inside help_drain() (step 3)

  uint64_t drains = 0;                      // drains applied in parts (runtime mutex)
  std::atomic<uint64_t> parts_helped{0};    // parts applied by a helper (tests read it)
};

}  // namespace cxltier
