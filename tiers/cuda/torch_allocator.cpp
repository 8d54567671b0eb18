// SPDX-License-Identifier: Apache-2.0
// libcxltier_torch.so: PyTorch's pluggable CUDA allocator entry points (torch_allocator.h).
// Device memory is reserved in large cuMemAlloc segments per device through the dlopen'ed
// driver (no CUDA runtime link, like the rest of cxltier) and carved best-fit by RangeAllocator.
// Stream semantics, as PyTorch expects of an allocator: a range freed on stream S may be handed
// out again at once for S (stream order protects it); for any other stream only after an event
// recorded on S at free time has completed (we never wait for that unless out of memory).
//
// Limits: CXLT_TORCH_MAX_BYTES (bytes, optional K/M/G/T suffix meaning KiB..TiB) caps what is
// reserved per device. Segments are never returned to the driver while any range in them is
// live; empty ones are released when a new segment does not fit.
#include "tiers/cuda/driver.hpp"
#include "tiers/cuda/range_alloc.hpp"
#include "tiers/cuda/torch_allocator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {

using namespace cxltier::cuda;

constexpr uint64_t kAlign = 512;                    // what cudaMalloc guarantees, and PyTorch assumes
constexpr uint64_t kMinSegment = uint64_t{256} << 20;
constexpr uint64_t kSegmentRound = uint64_t{2} << 20;
constexpr int kMaxDevices = 64;

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

struct Segment {
  CUdeviceptr base;
  uint64_t size;
  RangeAllocator ranges;
  Segment(CUdeviceptr b, uint64_t s) : base(b), size(s), ranges(s) {}
};

struct Live {
  Segment *seg;
  uint64_t bytes;
};

struct Pending {
  Segment *seg;
  uint64_t offset, bytes;
  CUstream stream;
  CUevent event;
};

struct DeviceArena {
  std::mutex mu;
  bool tried = false, ready = false;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  std::vector<std::unique_ptr<Segment>> segments;
  std::map<CUdeviceptr, Live> live;
  std::vector<Pending> pending;
  std::vector<CUevent> spare_events;
  uint64_t reserved = 0, allocated = 0, limit = UINT64_MAX;
};

DeviceArena *arenas() {
  static DeviceArena a[kMaxDevices];
  return a;
}

void say_once(const std::string &msg) {
  static std::mutex mu;
  static std::string last;
  std::lock_guard lk(mu);
  if (msg == last) return;
  last = msg;
  std::fprintf(stderr, "cxltier torch allocator: %s\n", msg.c_str());
}

uint64_t parse_limit(const char *v) {
  char *end = nullptr;
  unsigned long long n = std::strtoull(v, &end, 10);
  if (end == v) return UINT64_MAX;
  uint64_t mul = 1;
  switch (*end) {
    case 'k': case 'K': mul = uint64_t{1} << 10; break;
    case 'm': case 'M': mul = uint64_t{1} << 20; break;
    case 'g': case 'G': mul = uint64_t{1} << 30; break;
    case 't': case 'T': mul = uint64_t{1} << 40; break;
    default: break;
  }
  return n * mul;
}

// Set up a device's arena on first use: the driver, the device, its primary context (the one
// PyTorch itself uses). Called with a.mu held.
bool ready(DeviceArena &a, int device) {
  if (a.tried) return a.ready;
  a.tried = true;
  const DriverLoad &drv = driver();
  if (!drv.ok) {
    say_once("no CUDA driver: " + drv.why);
    return false;
  }
  CUresult r = drv.api.cuDeviceGet(&a.dev, device);
  if (r == kSuccess) r = drv.api.cuDevicePrimaryCtxRetain(&a.ctx, a.dev);
  if (r != kSuccess) {
    say_once("device " + std::to_string(device) + ": " + result_string(&drv.api, r));
    a.ctx = nullptr;
    return false;
  }
  if (const char *v = std::getenv("CXLT_TORCH_MAX_BYTES"); v && *v) a.limit = parse_limit(v);
  a.ready = true;
  return true;
}

// Give back pending ranges whose event completed, or that were freed on `stream` (nullptr
// with all=true: every pending range, after waiting for its event).
void reclaim(DeviceArena &a, const DriverApi &api, CUstream stream, bool all) {
  size_t keep = 0;
  for (size_t i = 0; i < a.pending.size(); ++i) {
    Pending &p = a.pending[i];
    bool done = p.stream == stream || api.cuEventQuery(p.event) == kSuccess;
    if (!done && all) done = api.cuEventSynchronize(p.event) == kSuccess;
    if (done) {
      p.seg->ranges.free(p.offset, p.bytes);
      a.spare_events.push_back(p.event);
    } else {
      a.pending[keep++] = p;
    }
  }
  a.pending.resize(keep);
}

void *carve(DeviceArena &a, uint64_t bytes) {
  for (auto &seg : a.segments)
    if (auto off = seg->ranges.allocate(bytes)) {
      CUdeviceptr p = seg->base + *off;
      a.live[p] = Live{seg.get(), bytes};
      a.allocated += bytes;
      return reinterpret_cast<void *>(static_cast<uintptr_t>(p));
    }
  return nullptr;
}

void release_empty_segments(DeviceArena &a, const DriverApi &api) {
  for (size_t i = 0; i < a.segments.size();) {
    if (a.segments[i]->ranges.all_free()) {
      api.cuMemFree(a.segments[i]->base);
      a.reserved -= a.segments[i]->size;
      a.segments.erase(a.segments.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

}  // namespace

extern "C" {

void *cxlt_torch_malloc(ssize_t size, int device, void *stream) {
  if (size <= 0 || device < 0 || device >= kMaxDevices) return nullptr;
  DeviceArena &a = arenas()[device];
  try {
    std::lock_guard lk(a.mu);
    if (!ready(a, device)) return nullptr;
    const DriverApi &api = driver().api;
    ScopedContext scope(api, a.ctx);
    if (scope.result() != kSuccess) return nullptr;
    const uint64_t bytes = round_up(static_cast<uint64_t>(size), kAlign);
    auto *s = static_cast<CUstream>(stream);
    reclaim(a, api, s, false);
    if (void *p = carve(a, bytes)) return p;
    if (!a.pending.empty()) {
      reclaim(a, api, s, true);
      if (void *p = carve(a, bytes)) return p;
    }
    const uint64_t seg_bytes = std::max(kMinSegment, round_up(bytes, kSegmentRound));
    if (a.reserved + seg_bytes > a.limit) release_empty_segments(a, api);
    if (a.reserved + seg_bytes > a.limit) {
      say_once("device " + std::to_string(device) + ": CXLT_TORCH_MAX_BYTES reached (" + std::to_string(a.reserved) +
               " bytes reserved, " + std::to_string(seg_bytes) + " more needed)");
      return nullptr;
    }
    CUdeviceptr base = 0;
    CUresult r = api.cuMemAlloc(&base, seg_bytes);
    if (r != kSuccess) {
      release_empty_segments(a, api);
      r = api.cuMemAlloc(&base, seg_bytes);
    }
    if (r != kSuccess) {
      say_once("device " + std::to_string(device) + ": cuMemAlloc of " + std::to_string(seg_bytes) +
               " bytes failed: " + result_string(&api, r));
      return nullptr;
    }
    a.segments.push_back(std::make_unique<Segment>(base, seg_bytes));
    a.reserved += seg_bytes;
    return carve(a, bytes);
  } catch (...) {
    return nullptr;  // out of host memory: PyTorch reports an allocation failure
  }
}

void cxlt_torch_free(void *ptr, ssize_t size, int device, void *stream) {
  (void)size;  // we know each range's size; PyTorch's may be the unrounded request
  if (ptr == nullptr || device < 0 || device >= kMaxDevices) return;
  DeviceArena &a = arenas()[device];
  try {
    std::lock_guard lk(a.mu);
    if (!a.ready) return;
    const DriverApi &api = driver().api;
    auto it = a.live.find(static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(ptr)));
    if (it == a.live.end()) {
      say_once("cxlt_torch_free of a pointer this allocator did not hand out (ignored)");
      return;
    }
    const Live l = it->second;
    a.live.erase(it);
    a.allocated -= l.bytes;
    const uint64_t off = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ptr)) - l.seg->base;
    ScopedContext scope(api, a.ctx);
    CUevent ev = nullptr;
    if (!a.spare_events.empty()) {
      ev = a.spare_events.back();
      a.spare_events.pop_back();
    } else if (api.cuEventCreate(&ev, kEventDisableTiming) != kSuccess) {
      ev = nullptr;
    }
    auto *s = static_cast<CUstream>(stream);
    if (ev != nullptr && api.cuEventRecord(ev, s) == kSuccess) {
      a.pending.push_back(Pending{l.seg, off, l.bytes, s, ev});
      return;
    }
    // No event: wait for the stream, then the range is free for everyone.
    if (ev) a.spare_events.push_back(ev);
    api.cuStreamSynchronize(s);
    l.seg->ranges.free(off, l.bytes);
  } catch (...) {
    // Out of host memory recording a free: the range stays reserved (a leak, not a fault).
  }
}

int cxlt_torch_stats(int device, uint64_t *reserved_bytes, uint64_t *allocated_bytes) {
  if (device < 0 || device >= kMaxDevices) return -1;
  DeviceArena &a = arenas()[device];
  std::lock_guard lk(a.mu);
  if (reserved_bytes) *reserved_bytes = a.reserved;
  if (allocated_bytes) *allocated_bytes = a.allocated;
  return 0;
}

}  // extern "C"
