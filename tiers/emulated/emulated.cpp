// SPDX-License-Identifier: Apache-2.0
// The emulated tier backend: host memory standing in for a tier that the topology describes
// but this machine lacks (an XML topology, the embedded default). Optionally paced: copies into
// it take at least bytes / pace_mib_s (its option key, tiers.N.pace_mib_s), shared by all threads
// as one link, for demonstrations.
// It never claims placement: ext_describe says it is emulated.
#include "lib/memory/copy.hpp"
#include "lib/memory/tier_ops.hpp"
#include "tiers/hostmem.hpp"
#include "tiers/registry.hpp"

#include <cxltier/tools/units.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <string>
#include <thread>

namespace cxltier {

namespace {

using Clock = std::chrono::steady_clock;

struct EmulatedState {
  HugePageMode huge = HugePageMode::hugetlb;
  uint64_t declared_capacity = 0;
  double pace_mib_s = 0;
  std::string who;
  std::string description;
  std::atomic<uint64_t> allocated{0};
  std::mutex pace_mutex;
  Clock::time_point link_free_at{};  // when the paced "link" is next idle
};

// The configuration's check of tiers.N.pace_mib_s, across the whole value range.
const char *check_pace(double mib_s) {
  if (!(mib_s >= 0.0) || !std::isfinite(mib_s)) return "must be a finite number >= 0";
  // Slower than this, one block's copy time overflows the pacing clock.
  if (mib_s > 0.0 && mib_s < 1.0 / 1024.0) return "must be 0 (off) or at least 1/1024 MiB/s (1 KiB/s)";
  return nullptr;
}

const TierOption kEmulatedOptions[] = {
    {.key = CXLT_OPTION_PACE,
     .type = TierOptionType::number,
     .default_value = "0.0",
     .doc = "MiB/s; emulated copies into the tier; 0: off",
     .choices = nullptr,
     .noun = nullptr,
     .min_value = 0.0,
     .check = check_pace},
    {.key = nullptr, .type = TierOptionType::text, .default_value = nullptr, .doc = nullptr, .choices = nullptr,
     .noun = nullptr, .min_value = 0.0, .check = nullptr},
};

cxlt_result_t emulated_initialize(const TierBackendParams *params, void **state) {
  try {
    double pace = 0;
    if (const std::string *v = params->option(CXLT_OPTION_PACE)) {
      char *end = nullptr;
      pace = std::strtod(v->c_str(), &end);
      if (end == v->c_str() || *end != '\0' || !(pace >= 0) || !std::isfinite(pace)) {
        backend_set_error("emulated backend: pace_mib_s " + *v + " must be 0 (off) or a positive bandwidth in MiB/s");
        return CXLT_ERROR_INVALID_ARGUMENT;
      }
    }
    auto *s = new EmulatedState;
    s->huge = params->huge_pages;
    s->declared_capacity = params->capacity_bytes;
    s->pace_mib_s = pace;
    std::string kind = tier_kind_name(params->kind);
    s->who = "emulated backend (" + (params->tier_name.empty() ? kind : "tier '" + params->tier_name + "'") + ")";
    s->description = "emulated " + kind + " tier on host memory (standing in for memory this machine lacks; "
                     "placement, bandwidth and latency are not the real device's)";
    if (s->pace_mib_s > 0) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.0f", s->pace_mib_s);
      s->description += "; copies into it paced to " + std::string(buf) + " MiB/s";
    }
    *state = s;
    return CXLT_OK;
  } catch (...) {
    backend_set_error("emulated backend: out of host memory at initialize");
    return CXLT_ERROR_OUT_OF_HOST_MEMORY;
  }
}

void emulated_finalize(void *state) { delete static_cast<EmulatedState *>(state); }

cxlt_result_t emulated_alloc_extent(void *state, size_t bytes, TierExtent *out) {
  auto *s = static_cast<EmulatedState *>(state);
  TierExtent e;
  cxlt_result_t r = hostmem::map(bytes, s->huge, {}, &e);
  if (r != CXLT_OK) return r;
  r = hostmem::populate(e.base, e.bytes);
  if (r != CXLT_OK) {
    hostmem::unmap(e);
    return r;
  }
  s->allocated.fetch_add(bytes, std::memory_order_relaxed);
  *out = e;
  return CXLT_OK;
}

cxlt_result_t emulated_free_extent(void *state, const TierExtent *extent) {
  auto *s = static_cast<EmulatedState *>(state);
  return hostmem::free_counted(extent, s->allocated, s->who);
}

cxlt_result_t emulated_capacity(void *state, TierCapacity *out) {
  auto *s = static_cast<EmulatedState *>(state);
  long pages = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES);
  uint64_t host = pages > 0 ? static_cast<uint64_t>(pages) * hostmem::page_size() : 0;
  uint64_t host_free = avail > 0 ? static_cast<uint64_t>(avail) * hostmem::page_size() : host;
  TierCapacity c;
  c.total_bytes = s->declared_capacity ? std::min(s->declared_capacity, host) : host;
  c.free_bytes = std::min(c.total_bytes, host_free);
  c.allocated_bytes = s->allocated.load(std::memory_order_relaxed);
  *out = c;
  return CXLT_OK;
}

cxlt_result_t emulated_copy_in(void *state, void *dst, const void *src, size_t bytes,
                               const TierOps *) {
  auto *s = static_cast<EmulatedState *>(state);
  if (s->pace_mib_s <= 0) return CXLT_ERROR_NOT_SUPPORTED;  // unpaced: the runtime's kernel
  // Reserve this copy's slot on the shared link first, so threads queue as on one device.
  const auto duration = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::min(1e9, static_cast<double>(bytes) / (s->pace_mib_s * 1048576.0))));
  Clock::time_point done;
  {
    std::lock_guard<std::mutex> lock(s->pace_mutex);
    Clock::time_point start = std::max(Clock::now(), s->link_free_at);
    done = start + duration;
    s->link_free_at = done;
  }
  copy_block(CopyKernel::nt, dst, src, bytes);
  std::this_thread::sleep_until(done);
  return CXLT_OK;
}

cxlt_result_t emulated_describe(void *state, const char **out) {
  *out = static_cast<EmulatedState *>(state)->description.c_str();
  return CXLT_OK;
}

const TierOps kEmulatedOps = {
    .version = CXLT_TIER_OPS_VERSION,
    .name = "emulated",
    .initialize = emulated_initialize,
    .finalize = emulated_finalize,
    .alloc_extent = emulated_alloc_extent,
    .free_extent = emulated_free_extent,
    .capacity = emulated_capacity,
    .ext_verify_placement = nullptr,  // there is no real placement to verify
    .ext_copy_in = emulated_copy_in,
    .ext_copy_out = nullptr,  // reading out of an emulated tier is not paced
    .ext_describe = emulated_describe,
    .traits = CXLT_TRAIT_HOLDS_BYTES | CXLT_TRAIT_HOST_ADDRESSABLE | CXLT_TRAIT_PACES,
    .options = kEmulatedOptions,
    .ext_control = nullptr,
};

}  // namespace

const TierOps *tier_emulated_ops() noexcept { return &kEmulatedOps; }

}  // namespace cxltier
