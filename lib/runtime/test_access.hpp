// SPDX-License-Identifier: Apache-2.0
// What the tests reach inside a Runtime that its public API does not offer. Runtime names this
// struct a friend; only the tests include this header, and nothing in it is exported.
#pragma once

#include <cxltier/runtime.hpp>

#include <cstddef>
#include <memory>
#include <mutex>

namespace cxltier {

class FaultControl;  // tiers/faulty/faulty.hpp
class RemoteTier;    // lib/runtime/remote.hpp

struct RuntimeTestAccess {
  // The fault controller of a tier using the faulty backend, or nullptr.
  static std::shared_ptr<FaultControl> faults(Runtime &rt, size_t rank);
  // Drains of the access log applied in parts (lib/runtime/parallel_drain.cpp), and the parts
  // of them that engine threads other than the draining one applied.
  static uint64_t parallel_drains(Runtime &rt);
  static uint64_t parts_helped(Runtime &rt);
  // Drains with the records for parts that applied them serially: the shards' batches interleaved.
  static uint64_t interleaved_drains(Runtime &rt);
  // Have the draining thread claim the parts of a drain in parts in reverse (its own shard's
  // last part first, then the others' from the last), so that applying a block's records in
  // drain order rests on the records moved out of later parts, not on the claiming order.
  static void claim_parts_in_reverse(Runtime &rt, bool on);
  // The first part the draining thread claimed in the last drain in parts (its shard times
  // ParallelDrain::kShardParts, plus the part's place in the shard).
  static unsigned drainer_first_part(Runtime &rt);
  // Times a long holder of the runtime's mutex (the reconciliation's scan) handed it to a
  // thread waiting in step() or a drain, between two chunks of its work (pass_lock).
  static uint64_t lock_handovers(Runtime &rt);
  // Tier `rank`'s LRFU index upkeep (LrfuIndex::Stats), made by the mover in pieces: the
  // rebuilds it began, and those another call completed. Zeros when the tier's policy is not
  // the LRFU index.
  struct IndexUpkeep {
    uint64_t rebuilds = 0, completed = 0;
  };
  static IndexUpkeep index_upkeep(Runtime &rt, size_t rank);
  // Whether the drain prefetches ahead now (enough ids: access_log.cpp, prefetch_pays).
  static bool prefetches_ahead(Runtime &rt);
  // Whether access_handles may apply its batch at the call when it can take the mutex
  // (access_log.cpp, step 2; on by default). Off: every batch goes through the log, and is
  // applied by the next drain (in parts, with several engine threads and many records).
  static void apply_at_call(Runtime &rt, bool on);
  // The runtime's mutex, held as an engine thread applying its batch at the call holds it
  // (marked: access_log.cpp, step 2), and released unlocked first, then the mark cleared, so
  // that a thread waiting for it always finds it free once the mark is gone. (The engine
  // thread's own release clears the mark under the mutex first: a waiter that reads the mark
  // between the two gives up and appends, a slower path only.)
  static std::unique_lock<std::mutex> hold_as_at_call(Runtime &rt);
  static void release_as_at_call(Runtime &rt, std::unique_lock<std::mutex> &lk);
  // How long an engine thread waits for another applying its batch at the call (50 µs by
  // default), and how many times an engine thread, finding the mutex taken with several
  // shards used, began to try it again (ending at once when the holder is not marked).
  static void set_at_call_wait_us(Runtime &rt, unsigned us);
  static uint64_t at_call_waits(Runtime &rt);
  // Threads counted as waiting for the runtime's mutex (LockCount: lock_helping, Impl::lock and
  // relock, a CountedCv's wait), and a
  // count added or taken away by hand: what a waiting query looks like to an engine thread.
  static unsigned lock_waiters(Runtime &rt);
  static void add_lock_waiters(Runtime &rt, int delta);
  // The shard the calling thread records to in the runtime's access log (AccessLog::thread_shard).
  static int thread_shard(Runtime &rt);
  // Batches access_handles applied at the call so.
  static uint64_t batches_applied_at_call(Runtime &rt);
  // The runtime's mutex, held: what another thread (the mover, a query) holding it looks like.
  static std::unique_lock<std::mutex> lock_mutex(Runtime &rt);
  // Append accesses to the calling thread's shard of the access log as access_handles' step 2
  // does, without its step 1 check: the records of a block dropped between an engine thread's
  // check and its append, made at will. False when the shard has no room.
  static bool append_unchecked(Runtime &rt, const uint64_t *handles, const float *attention, size_t n);
  // Set or clear the held flag of resident block `key` (kFlagHeld: what another call sets while
  // it makes room) as a fault that never clears it would leave it. False when not resident.
  static bool set_held(Runtime &rt, const Key &key, bool held);
  // Give an open runtime a remote tier of the test's making (a double whose write-outs the test
  // holds and lets go), in place of the Redis Cluster client [remote] would open.
  static void set_remote(Runtime &rt, std::unique_ptr<RemoteTier> remote);
  // The bytes per state that Runtime::open's memory check counts for a full store of
  // `capacity` states with this runtime's policy and tiers.
  static double bytes_per_state(Runtime &rt, uint64_t capacity);
};

}  // namespace cxltier
