// SPDX-License-Identifier: Apache-2.0
// TierBackend: one initialised backend (ops table + state) with C++ ownership. The ops stay a
// C-style table so backends can be written and versioned independently; this wrapper turns
// their result codes into Error exceptions on set-up paths and keeps the noexcept calls
// available for hot paths.
#pragma once

#include "lib/memory/tier_ops.hpp"

#include <memory>
#include <string>

namespace cxltier {

class TierBackend {
public:
  // Find, validate and initialise backend `name`. Throws Error(CXLT_ERROR_NOT_SUPPORTED) with
  // the registry's reason when this build lacks it, or the initialize op's code and message.
  TierBackend(const std::string &name, const TierBackendParams &params);
  ~TierBackend();
  TierBackend(const TierBackend &) = delete;
  TierBackend &operator=(const TierBackend &) = delete;

  const TierOps &ops() const noexcept { return ops_; }
  void *state() const noexcept { return state_; }
  const std::string &name() const noexcept { return name_; }
  const TierBackendParams &params() const noexcept { return params_; }

  // Noexcept forms: the result code, and the message in backend_last_error() on failure.
  cxlt_result_t try_alloc_extent(size_t bytes, TierExtent *out) noexcept {
    return ops_.alloc_extent(state_, bytes, out);
  }
  cxlt_result_t try_free_extent(const TierExtent &e) noexcept { return ops_.free_extent(state_, &e); }

  // Throwing forms: Error(code, "tier backend '<name>': <backend message>").
  TierExtent alloc_extent(size_t bytes);
  void free_extent(const TierExtent &e);
  TierCapacity capacity() const;
  void verify_placement(const void *ptr, size_t bytes) const;  // NOT_SUPPORTED if it cannot
  std::string describe() const;                                // "" if the backend says nothing
  std::shared_ptr<void> control() const;                       // ext_control's object; nullptr if none
  bool supports(TierOp op) const noexcept { return tier_op_supported(ops_, op); }

private:
  [[noreturn]] void raise(cxlt_result_t r, const char *what) const;

  std::string name_;
  TierBackendParams params_;
  TierOps ops_{};
  void *state_ = nullptr;
};

}  // namespace cxltier
