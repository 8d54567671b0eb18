// SPDX-License-Identifier: Apache-2.0
// TierBackend: ownership of one initialised backend, and the throwing forms of its ops.
#include "backend.hpp"

#include <cxltier/error.hpp>

namespace cxltier {

TierBackend::TierBackend(const std::string &name, const TierBackendParams &params)
    : name_(name), params_(params) {
  std::string why;
  const TierOps *ops = tier_ops_find(name, &why);
  if (ops == nullptr) fail(CXLT_ERROR_NOT_SUPPORTED, why);
  ops_ = *ops;
  backend_set_error("");
  cxlt_result_t r = ops_.initialize(&params_, &state_);
  if (r != CXLT_OK) {
    state_ = nullptr;
    raise(r, "initialize");
  }
}

TierBackend::~TierBackend() {
  if (state_) ops_.finalize(state_);
}

void TierBackend::raise(cxlt_result_t r, const char *what) const {
  std::string msg = backend_last_error();
  if (msg.empty()) msg = std::string(what) + " failed (" + cxlt_result_string(r) + ")";
  std::string tier = params_.tier_name.empty() ? "" : " (tier '" + params_.tier_name + "')";
  fail(r, "tier backend '", name_, "'", tier, ": ", msg);
}

TierExtent TierBackend::alloc_extent(size_t bytes) {
  TierExtent e;
  backend_set_error("");
  cxlt_result_t r = ops_.alloc_extent(state_, bytes, &e);
  if (r != CXLT_OK) raise(r, "alloc_extent");
  return e;
}

void TierBackend::free_extent(const TierExtent &e) {
  backend_set_error("");
  cxlt_result_t r = ops_.free_extent(state_, &e);
  if (r != CXLT_OK) raise(r, "free_extent");
}

TierCapacity TierBackend::capacity() const {
  TierCapacity c;
  backend_set_error("");
  cxlt_result_t r = ops_.capacity(state_, &c);
  if (r != CXLT_OK) raise(r, "capacity");
  return c;
}

void TierBackend::verify_placement(const void *ptr, size_t bytes) const {
  backend_set_error("");
  cxlt_result_t r = ops_.ext_verify_placement(state_, ptr, bytes);
  if (r != CXLT_OK) raise(r, "verify_placement");
}

std::string TierBackend::describe() const {
  const char *d = nullptr;
  if (ops_.ext_describe(state_, &d) != CXLT_OK || d == nullptr) return {};
  return d;
}

std::shared_ptr<void> TierBackend::control() const {
  std::shared_ptr<void> c;
  if (ops_.ext_control(state_, &c) != CXLT_OK) return nullptr;
  return c;
}

}  // namespace cxltier
