// SPDX-License-Identifier: Apache-2.0
// CopyEngine: per-direction streams, batched cuMemcpy*Async, one event per batch, an event pool.
#include "tiers/cuda/copy_engine.hpp"

#include <cxltier/error.hpp>

namespace cxltier::cuda {

const char *direction_name(Direction d) noexcept {
  switch (d) {
    case Direction::h2d: return "host-to-device";
    case Direction::d2h: return "device-to-host";
    case Direction::d2d: return "device-to-device";
  }
  return "?";
}

CopyEngine::CopyEngine(const DriverApi &api, CUcontext ctx, unsigned lanes)
    : api_(api), ctx_(ctx), lanes_(lanes ? lanes : 1), round_robin_{0, 0, 0} {
  ScopedContext scope(api_, ctx_);
  if (scope.result() != kSuccess)
    fail(CXLT_ERROR_BACKEND, "cuda copy engine: cuCtxPushCurrent failed: ", result_string(&api_, scope.result()));
  for (auto &streams : streams_) {
    for (unsigned i = 0; i < lanes_; ++i) {
      CUstream s = nullptr;
      CUresult r = api_.cuStreamCreate(&s, kStreamNonBlocking);
      if (r != kSuccess) {
        for (auto &ss : streams_)
          for (CUstream x : ss) api_.cuStreamDestroy(x);
        fail(CXLT_ERROR_BACKEND, "cuda copy engine: cuStreamCreate failed: ", result_string(&api_, r));
      }
      streams.push_back(s);
    }
  }
}

CopyEngine::~CopyEngine() {
  ScopedContext scope(api_, ctx_);
  for (auto &streams : streams_)
    for (CUstream s : streams) {
      api_.cuStreamSynchronize(s);
      api_.cuStreamDestroy(s);
    }
  for (CUevent e : all_events_) api_.cuEventDestroy(e);
}

CUstream CopyEngine::next_stream(Direction dir) noexcept {
  const auto d = static_cast<size_t>(dir);
  return streams_[d][round_robin_[d].fetch_add(1, std::memory_order_relaxed) % lanes_];
}

cxlt_result_t CopyEngine::take_event(CUevent *ev, std::string *err) noexcept {
  try {
    std::lock_guard lk(events_mu_);
    if (!free_events_.empty()) {
      *ev = free_events_.back();
      free_events_.pop_back();
      return CXLT_OK;
    }
    // Timing off: these events only order and signal, which makes them cheaper to record.
    CUevent e = nullptr;
    CUresult r = api_.cuEventCreate(&e, kEventDisableTiming);
    if (r != kSuccess) {
      *err = "cuEventCreate failed: " + result_string(&api_, r);
      return CXLT_ERROR_BACKEND;
    }
    all_events_.push_back(e);
    *ev = e;
    return CXLT_OK;
  } catch (...) {
    *err = "out of host memory for the event pool";
    return CXLT_ERROR_OUT_OF_HOST_MEMORY;
  }
}

void CopyEngine::give_event(CUevent ev) noexcept {
  std::lock_guard lk(events_mu_);
  free_events_.push_back(ev);  // capacity: all_events_ holds at least as many
}

cxlt_result_t CopyEngine::submit_with(Direction dir, const std::function<CUresult(CUstream)> &enqueue, Ticket *out,
                                      std::string *err) noexcept {
  return submit_raw(
      dir, [](void *ctx, CUstream s) { return (*static_cast<const std::function<CUresult(CUstream)> *>(ctx))(s); },
      const_cast<void *>(static_cast<const void *>(&enqueue)), out, err);
}

cxlt_result_t CopyEngine::submit_raw(Direction dir, CUresult (*enqueue)(void *, CUstream), void *ctx, Ticket *out,
                                     std::string *err) noexcept {
  ScopedContext scope(api_, ctx_);
  if (scope.result() != kSuccess) {
    *err = "cuCtxPushCurrent failed: " + result_string(&api_, scope.result());
    return CXLT_ERROR_BACKEND;
  }
  CUevent ev = nullptr;
  cxlt_result_t rr = take_event(&ev, err);
  if (rr != CXLT_OK) return rr;
  CUstream s = next_stream(dir);
  CUresult r = kSuccess;
  try {
    r = enqueue(ctx, s);
  } catch (...) {
    r = kErrorInvalidValue;  // a throwing enqueue function: treat as a failed enqueue
  }
  if (r != kSuccess) {
    // What was enqueued before the failure still runs; wait for it so the caller may reuse the
    // buffers at once.
    api_.cuStreamSynchronize(s);
    give_event(ev);
    *err = std::string(direction_name(dir)) + " copy could not be enqueued: " + result_string(&api_, r);
    return CXLT_ERROR_BACKEND;
  }
  r = api_.cuEventRecord(ev, s);
  if (r != kSuccess) {
    api_.cuStreamSynchronize(s);
    give_event(ev);
    *err = "cuEventRecord failed: " + result_string(&api_, r);
    return CXLT_ERROR_BACKEND;
  }
  out->event = ev;
  return CXLT_OK;
}

namespace {
struct SegBatch {
  const DriverApi *api;
  Direction dir;
  const CopySeg *segs;
  size_t n;
};

CUresult enqueue_segments(void *ctx, CUstream s) {
  const SegBatch &b = *static_cast<const SegBatch *>(ctx);
  for (size_t i = 0; i < b.n; ++i) {
    const CopySeg &c = b.segs[i];
    CUresult r = kSuccess;
    switch (b.dir) {
      case Direction::h2d: r = b.api->cuMemcpyHtoDAsync(c.dst, reinterpret_cast<const void *>(c.src), c.bytes, s); break;
      case Direction::d2h: r = b.api->cuMemcpyDtoHAsync(reinterpret_cast<void *>(c.dst), c.src, c.bytes, s); break;
      // Unified addressing: cuMemcpyAsync also copies between two devices (peer or staged).
      case Direction::d2d: r = b.api->cuMemcpyAsync(c.dst, c.src, c.bytes, s); break;
    }
    if (r != kSuccess) return r;
  }
  return kSuccess;
}
}  // namespace

cxlt_result_t CopyEngine::submit(Direction dir, const CopySeg *segs, size_t n, Ticket *out, std::string *err) noexcept {
  SegBatch batch{&api_, dir, segs, n};
  return submit_raw(dir, enqueue_segments, &batch, out, err);
}

cxlt_result_t CopyEngine::wait(Ticket &t, std::string *err) noexcept {
  if (t.event == nullptr) return CXLT_OK;
  ScopedContext scope(api_, ctx_);
  CUresult r = api_.cuEventSynchronize(t.event);
  give_event(t.event);
  t.event = nullptr;
  if (r != kSuccess) {
    *err = "waiting for a copy failed: " + result_string(&api_, r);
    return CXLT_ERROR_BACKEND;
  }
  return CXLT_OK;
}

bool CopyEngine::done(const Ticket &t) noexcept {
  if (t.event == nullptr) return true;
  ScopedContext scope(api_, ctx_);
  return api_.cuEventQuery(t.event) != kErrorNotReady;
}

cxlt_result_t CopyEngine::copy(Direction dir, const CopySeg *segs, size_t n, std::string *err) noexcept {
  Ticket t;
  cxlt_result_t r = submit(dir, segs, n, &t, err);
  if (r != CXLT_OK) return r;
  return wait(t, err);
}

}  // namespace cxltier::cuda
