// SPDX-License-Identifier: Apache-2.0
// The runtime's narrow view of a remote tier (a store below the last local tier, shared by a
// fleet: tiers/remote implements it on Redis Cluster). The runtime holds a pointer to one,
// nullptr when [remote] is off, and calls it at two points only: write-out (a block dropped
// from the last local tier, see the protocol in migration.cpp) and fetch (a block resident
// nowhere being admitted, see Runtime::admit). The policy state never leaves the process: the
// remote copy is a cache the engine (Redis) may evict at will.
#pragma once

#include "lib/runtime/counters.hpp"

#include <cxltier/config.hpp>
#include <cxltier/key.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace cxltier {

// Counters since open (monotone; read without the runtime's lock), listed in counters.hpp.
struct RemoteCounters {
#define CXLT_X(name) uint64_t name = 0;
  CXLT_REMOTE_STATS_COUNTERS(CXLT_X)
  CXLT_REMOTE_JSON_COUNTERS(CXLT_X)
#undef CXLT_X
};

class RemoteTier {
public:
  virtual ~RemoteTier() = default;

  // Read the block `key` into dst (bytes long) within the deadline. True only when a value was
  // found whose header and checksum match: dst then holds the block. On false dst holds
  // garbage. Never throws; thread-safe; the caller holds no lock.
  virtual bool fetch(const Key &key, void *dst, size_t bytes) noexcept = 0;
  // Write the block within the deadline, in the calling thread. True when the server
  // acknowledged it. src must stay unchanged until the call returns.
  virtual bool store(const Key &key, const void *src, size_t bytes) noexcept = 0;
  // Queue a write for the client's own threads. False (done is not called) when max_pending
  // write-outs are already queued or in flight. Otherwise done(ok) is called exactly once, from
  // a client thread, when the write ended; src must stay unchanged until then.
  virtual bool store_async(const Key &key, const void *src, size_t bytes, std::function<void(bool ok)> done) noexcept = 0;
  // Count a drop that was not written out (below the threshold, or store_async refused it).
  virtual void note_skipped() noexcept = 0;
  // Finish every queued write (each within the deadline), call their done callbacks, stop the
  // threads. Idempotent. Called by the runtime before it frees tier memory.
  virtual void stop() noexcept = 0;
  virtual RemoteCounters counters() const noexcept = 0;
  // The write-out threshold (an LRFU effective score in [0, 1]).
  virtual double write_threshold() const noexcept = 0;
  // "redis-cluster 127.0.0.1:7000 (3 masters), namespace 'm/80x8x128x2x16kv/bf16/tp0'".
  virtual std::string describe() const = 0;
};

// Connect to the configured cluster (the seed nodes, AUTH, the slot table) and start the
// write-out threads. Throws Error(CXLT_ERROR_CONFIG) for a bad [remote] value, and
// Error(CXLT_ERROR_NOT_SUPPORTED) when the library was built without the remote tier (meson
// option `remote`, hiredis missing). An unreachable cluster is not an error: every operation
// then fails within its deadline and counts as a miss, and the client keeps trying.
std::unique_ptr<RemoteTier> open_remote_tier(const RuntimeConfig &cfg);

// The namespace the keys get ("model/80x8x128x2x16kv/bf16/tp0", or remote.namespace).
// remote_namespace.cpp, as check_namespace().
std::string remote_namespace(const RuntimeConfig &cfg);

}  // namespace cxltier

namespace cxltier::remote {

// Why a namespace cannot be used ("" when it can): printable ASCII, no blank, no braces (a
// hash tag would put every block of the namespace in one slot, on one server), 1-200 bytes.
std::string check_namespace(std::string_view ns);

}  // namespace cxltier::remote
