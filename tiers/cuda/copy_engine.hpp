// SPDX-License-Identifier: Apache-2.0
// Asynchronous copies between host and device memory on dedicated streams, completion by
// events. Each direction (host to device, device to host, device to device) has its own
// non-blocking streams ("lanes"), so the GPU's copy engines run both directions at once; a
// batch of segments is enqueued back to back and one event marks its end.
//
// The runtime's copy rule (lib/memory/tier_ops.hpp) calls a backend once per block and expects the
// bytes in place on return, so the cuda backend submits a block's segments as one batch and
// waits for its event; several migration threads keep several batches in flight, and batches
// of opposite directions overlap. The bench and the layout tests submit larger batches.
#pragma once

#include "tiers/cuda/driver.hpp"
#include "tiers/cuda/kv_layout.hpp"

#include <cxltier/cxltier.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace cxltier::cuda {

enum class Direction : uint8_t { h2d = 0, d2h = 1, d2d = 2 };
const char *direction_name(Direction d) noexcept;  // "host-to-device", ...

class CopyEngine {
public:
  // Creates `lanes` streams per direction in `ctx` (retained by the caller for this object's
  // life). Throws Error(CXLT_ERROR_BACKEND) naming the driver call that failed.
  CopyEngine(const DriverApi &api, CUcontext ctx, unsigned lanes);
  ~CopyEngine();
  CopyEngine(const CopyEngine &) = delete;
  CopyEngine &operator=(const CopyEngine &) = delete;

  struct Ticket {
    CUevent event = nullptr;
  };

  // Enqueue `n` segments of direction `dir` on the next lane of that direction and record one
  // event after them. Returns at once. On failure nothing is left to wait for.
  cxlt_result_t submit(Direction dir, const CopySeg *segs, size_t n, Ticket *out, std::string *err) noexcept;
  // Enqueue whatever `enqueue` puts on the lane's stream (a kernel launch), then the event.
  cxlt_result_t submit_with(Direction dir, const std::function<CUresult(CUstream)> &enqueue, Ticket *out,
                            std::string *err) noexcept;
  // Wait until the ticket's work is done (errors of asynchronous copies surface here); the
  // event goes back to the pool. The ticket is empty afterwards.
  cxlt_result_t wait(Ticket &t, std::string *err) noexcept;
  // True once the ticket's work is done (cuEventQuery); never blocks.
  bool done(const Ticket &t) noexcept;
  // submit + wait.
  cxlt_result_t copy(Direction dir, const CopySeg *segs, size_t n, std::string *err) noexcept;

  CUcontext context() const noexcept { return ctx_; }
  unsigned lanes() const noexcept { return lanes_; }

private:
  cxlt_result_t submit_raw(Direction dir, CUresult (*enqueue)(void *, CUstream), void *ctx, Ticket *out,
                           std::string *err) noexcept;
  CUstream next_stream(Direction dir) noexcept;
  cxlt_result_t take_event(CUevent *ev, std::string *err) noexcept;
  void give_event(CUevent ev) noexcept;

  const DriverApi &api_;
  CUcontext ctx_;
  unsigned lanes_;
  std::vector<CUstream> streams_[3];      // per direction
  std::atomic<unsigned> round_robin_[3];  // next lane per direction
  std::mutex events_mu_;
  std::vector<CUevent> free_events_;
  std::vector<CUevent> all_events_;
};

}  // namespace cxltier::cuda
