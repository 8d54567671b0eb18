// SPDX-License-Identifier: Apache-2.0
// The tier backend contract: one small, versioned operations table per backend (as UMF's
// memory providers and hwloc's components). A backend hands out large extents of memory placed
// on its tier and reports capacity; the runtime's block pools carve extents into block slots.
//
// Rules (checked by tier_ops_validate() when a backend is registered):
//  - `version` comes first and is CXLT_TIER_OPS_VERSION for this layout; later versions only
//    append members (comment each addition with the version that added it).
//  - Mandatory: name, initialize, finalize, alloc_extent, free_extent, capacity.
//  - Optional members are prefixed ext_ and may be nullptr; tier_ops_validate() replaces
//    nullptr with functions that return CXLT_ERROR_NOT_SUPPORTED (tier_op_supported() tells
//    a real op from such a default).
//  - Every op returns a cxlt_result_t; on failure it sets a message with backend_set_error()
//    (thread-local), which the runtime puts into the Error it throws.
//  - Ops never throw.
//  - Ops are thread-safe: several threads may call any op except initialize/finalize on the
//    same state at once (the runtime's migration workers copy while admissions allocate).
//
// Copies between tiers (the migration engine's rule). To move `bytes` from tier S to tier D:
//   1. D.ext_copy_in(dst, src, bytes, &S.ops); if that returns CXLT_ERROR_NOT_SUPPORTED,
//   2. S.ext_copy_out(dst, src, bytes, &D.ops); if that returns CXLT_ERROR_NOT_SUPPORTED,
//   3. both sides are host memory (CXLT_EXTENT_HOST): the runtime's own copy kernels
//      (lib/memory/copy.hpp), chosen per pair.
// A copy op may return NOT_SUPPORTED at call time without touching anything ("use your own
// kernel"): the emulated backend does so when it is not paced, so its copies stay as fast as
// the runtime's. Any other error means the copy failed and `dst` holds garbage.
#pragma once

#include <cxltier/cxltier.h>
#include <cxltier/topology.hpp>

#include "cxlt_config.h"

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cxltier {

#define CXLT_TIER_OPS_VERSION 2u

// Which pages an extent of host memory is built from.
enum class HugePageMode : uint8_t {
  none,     // 4 KiB pages only
  thp,      // madvise(MADV_HUGEPAGE) (transparent huge pages), else 4 KiB
  hugetlb,  // explicit 2 MiB pages (MAP_HUGETLB) when the extent is a multiple of 2 MiB and
            // enough are free (on the tier's nodes), else THP, else 4 KiB
};

// What the runtime asks a backend for. Fields a backend does not use are ignored.
struct TierBackendParams {
  std::string tier_name;             // for messages ("cxl", "dram"); may be empty
  TierKind kind = TierKind::dram;
  std::vector<unsigned> numa_nodes;  // OS indexes the memory must be bound to (numa; memkind: checked)
  uint64_t budget_bytes = 0;         // the tier's budget: the most this tier will ask for
  uint64_t block_bytes = 0;          // slot size the pool will carve
  uint64_t capacity_bytes = 0;       // emulated, null: declared capacity of the tier stood in
                                     // for (0: host memory for emulated, unbounded for null)
  HugePageMode huge_pages = HugePageMode::hugetlb;
  bool verify_placement = true;      // numa/memkind: check every page's node after first touch
  // Backend option keys, as text: the tier's keys that backends declare (TierOps::options:
  // tiers.N.<key> from the configuration, already checked) and the keys the runtime fills by
  // trait (CXLT_OPTION_* below). Each backend reads the keys it knows and ignores the rest.
  std::vector<std::pair<std::string, std::string>> options;

  // The value of option `key`; nullptr when not given (the backend's default applies).
  const std::string *option(std::string_view key) const noexcept {
    for (const auto &[k, v] : options)
      if (k == key) return &v;
    return nullptr;
  }
  // Option `key` as a whole number into *out (`fallback` when not given); false when it is
  // given but not a whole number.
  bool option_int(std::string_view key, long long fallback, long long *out) const noexcept {
    const std::string *v = option(key);
    if (v == nullptr) {
      *out = fallback;
      return true;
    }
    char *end = nullptr;
    errno = 0;
    long long x = std::strtoll(v->c_str(), &end, 10);
    if (v->empty() || *end != '\0' || errno != 0) return false;
    *out = x;
    return true;
  }
  // Set option `key`, replacing an earlier value.
  void set_option(std::string_view key, std::string value) {
    for (auto &[k, v] : options)
      if (k == key) {
        v = std::move(value);
        return;
      }
    options.emplace_back(std::string(key), std::move(value));
  }
};

// Option keys that the contract defines, each tied to a trait: the runtime reads or fills them
// for backends with that trait (a backend's own keys are declared in its TierOps::options).
#define CXLT_OPTION_INNER_BACKEND "inner_backend"  // WRAPS_INNER: the backend wrapped (same params
                                                   // and options); absent: the decorator's default
#define CXLT_OPTION_DEVICE "cuda_device"           // DEVICE_MEMORY: the device ordinal the tier is on;
                                                   // PINS_FOR_DEVICE: the one it pins for (absent: 0)
#define CXLT_OPTION_KV_SEGMENTS "kv_segments"      // KV_LAYOUT: segments per block when blocks are laid
                                                   // out per layer (tiers.N.layout = per-layer); absent: contiguous
#define CXLT_OPTION_PACE "pace_mib_s"              // PACES: a value above 0 paces copies into the tier
                                                   // (the runtime reads it to report the copy method)

// A tier key that a backend declares (tiers.N.<key> in the configuration, CXLT_TIERS_N_<KEY>
// in the environment). The configuration accepts it on every tier, whatever the backend (as
// it always has), checks the value as declared here and hands it to the backend as text.
enum class TierOptionType : uint8_t {
  text,    // a string; `choices` (when set) lists the values it may take
  number,  // a float or an integer; stored as the shortest text that reads back the same
};
struct TierOption {
  const char *key;             // "pace_mib_s": what follows "tiers.N."
  TierOptionType type;
  const char *default_value;   // as text, what the backend assumes when the key is not given
  const char *doc;             // one line: what the key does (to_toml's comment)
  const char *const *choices;  // text: the values it may take, nullptr-terminated; nullptr: any
  const char *noun;            // text with choices: what a value is called ("memkind kind")
  double min_value;            // number: the least value a key's text may give
  // Number: a check across the whole configuration (validate()), or nullptr. Returns nullptr
  // when `value` is good, else why not, worded to follow "tiers.N.KEY = VALUE ".
  const char *(*check)(double value);
};

struct TierExtent {
  void *base = nullptr;  // nullptr only for the null backend
  size_t bytes = 0;
  uint32_t flags = 0;    // CXLT_EXTENT_* below
};
#define CXLT_EXTENT_HUGETLB 1u  // backed by explicit 2 MiB huge pages (MAP_HUGETLB)
#define CXLT_EXTENT_THP 2u      // transparent huge pages advised (MADV_HUGEPAGE, THP enabled)
#define CXLT_EXTENT_HOST 4u     // CPU-addressable host memory (memcpy works)
#define CXLT_EXTENT_DEVICE 8u   // device memory (only ext_copy_in/out can move it)
#define CXLT_EXTENT_PLACED 16u  // every page was verified on the tier's nodes after first touch

// Bytes, all of them; higher total/free is more room.
struct TierCapacity {
  uint64_t total_bytes = 0;      // the most this backend can supply (UINT64_MAX: unbounded)
  uint64_t free_bytes = 0;       // what the system reports free now (== total if unknown)
  uint64_t allocated_bytes = 0;  // extents this backend instance handed out, not yet freed
};

// Traits: what the core needs to know about a backend, so that it never compares names
// (lib/memory/choose.hpp picks backends by them, the runtime decides copies and checks by them).
#define CXLT_TRAIT_HOLDS_BYTES 1u        // extents keep what is written (the null backend's do not)
#define CXLT_TRAIT_HOST_ADDRESSABLE 2u   // the CPU reads and writes extents (memcpy works)
#define CXLT_TRAIT_DEVICE_MEMORY 4u      // extents are device memory: only the backend's copy ops move them
#define CXLT_TRAIT_WRAPS_INNER 8u        // a decorator: opens option CXLT_OPTION_INNER_BACKEND and passes through to it
#define CXLT_TRAIT_COPIES_ITSELF 16u     // its copy ops always copy (never decline at call time)
#define CXLT_TRAIT_BINDS_NODES 32u       // binds extents to the tier's NUMA nodes (a real placement)
#define CXLT_TRAIT_PACES 64u             // paces copies into the tier when option CXLT_OPTION_PACE > 0
                                         // (ext_copy_in declines otherwise)
#define CXLT_TRAIT_PINS_FOR_DEVICE 128u  // with WRAPS_INNER: pins the inner backend's extents for
                                         // the DMA of the device in option CXLT_OPTION_DEVICE
#define CXLT_TRAIT_KV_LAYOUT 256u        // lays blocks out per layer (option CXLT_OPTION_KV_SEGMENTS)
#define CXLT_TRAIT_INJECTS_FAULTS 512u   // injects failures as its control object says; ext_control
                                         // gives that object (a FaultControl, tiers/faulty/faulty.hpp)

struct TierOps {
  uint32_t version;  // CXLT_TIER_OPS_VERSION
  const char *name;  // "numa", "memkind", "emulated", "null", "faulty", "cuda", ...

  // Mandatory.
  // Check the parameters against this machine (nodes exist and have memory, the memkind kind
  // is available, ...) and create the backend's state. Refuses rather than falls back.
  cxlt_result_t (*initialize)(const TierBackendParams *params, void **state);
  void (*finalize)(void *state);
  // Allocate exactly `bytes` (> 0) placed on the tier, touched (no page faults later) and,
  // where the backend verifies placement, verified. *out is written only on success.
  cxlt_result_t (*alloc_extent)(void *state, size_t bytes, TierExtent *out);
  cxlt_result_t (*free_extent)(void *state, const TierExtent *extent);
  cxlt_result_t (*capacity)(void *state, TierCapacity *out);

  // Optional (nullptr: not supported).
  // Check that every page of [ptr, ptr+bytes) is on the tier's nodes; on failure the message
  // says which page is where.
  cxlt_result_t (*ext_verify_placement)(void *state, const void *ptr, size_t bytes);
  // Copy `bytes` into this tier (dst is in this tier, src in `src_ops`' tier). See the copy
  // rule above: NOT_SUPPORTED means "not by me, use the next step".
  cxlt_result_t (*ext_copy_in)(void *state, void *dst, const void *src, size_t bytes,
                               const TierOps *src_ops);
  // Copy `bytes` out of this tier (src is in this tier, dst in `dst_ops`' tier).
  cxlt_result_t (*ext_copy_out)(void *state, void *dst, const void *src, size_t bytes,
                                const TierOps *dst_ops);
  // A short description of what the backend chose (nodes, huge pages, kind, pacing). *out
  // stays valid until finalize.
  cxlt_result_t (*ext_describe)(void *state, const char **out);

  uint32_t traits;  // CXLT_TRAIT_* above (0: none)

  // Version 2.
  // The tier keys this backend accepts, ended by an entry whose key is nullptr; nullptr: none.
  const TierOption *options;
  // Optional: the backend's control object, shared with whoever drives it (tests arm a
  // FaultControl through it); its type is the backend's, documented by the trait that has one.
  cxlt_result_t (*ext_control)(void *state, std::shared_ptr<void> *out);
};

// Thread-local message for the last failing op of this thread.
void backend_set_error(const std::string &message) noexcept;
const std::string &backend_last_error() noexcept;

// The project's backends that a tier's `backend` key may name, in this build or not (a name
// this build lacks is refused at open with the registry's reason; decorators the runtime
// applies by itself are not among them). Defined by tiers/registry.cpp.
std::vector<std::string> tier_backend_choices();
// Every tier key a backend declares, of the backends in tier_backend_choices() (built or not,
// so that a configuration stays valid on every build), in registration order, each once.
// Defined by tiers/registry.cpp.
std::vector<const TierOption *> tier_options();

// Registration: declared here, defined by tiers/registry.cpp (the one file that lists the
// backends, linked into the same library). Returns the validated table, or nullptr for an unknown
// name or a backend this build lacks (memkind not found at configure time, cuda not yet
// written); `why` (may be nullptr) then says which and what to do.
const TierOps *tier_ops_find(const std::string &name, std::string *why);
// Backends this build has, in registration order.
std::vector<std::string> tier_ops_names();
// Validate mandatory ops and the version (lib/memory/tier_ops.cpp); fill optional ones with NOT_SUPPORTED defaults.
// Throws Error(CXLT_ERROR_BACKEND) naming the backend and the missing op.
TierOps tier_ops_validate(const TierOps &ops);

enum class TierOp { verify_placement, copy_in, copy_out, describe, control };
// True if a validated table has a real `op` (not the NOT_SUPPORTED default).
bool tier_op_supported(const TierOps &ops, TierOp op) noexcept;

}  // namespace cxltier
