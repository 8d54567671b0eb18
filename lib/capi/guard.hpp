// SPDX-License-Identifier: Apache-2.0
// The C ABI boundary: every exported function runs its body through capi_call(), which turns
// a cxltier::Error into its result code, any other exception into CXLT_ERROR_UNKNOWN or
// CXLT_ERROR_OUT_OF_HOST_MEMORY, and records the message for cxlt_last_error().
#pragma once

#include <cxltier/cxltier.h>
#include <cxltier/error.hpp>

#include <new>
#include <string>
#include <utility>

namespace cxltier::capi {

// Set this thread's last error (the message stays until the next failing call).
void set_last_error(cxlt_result_t code, const char *message) noexcept;
void clear_last_error() noexcept;

template <typename F>
cxlt_result_t capi_call(F &&body) noexcept {
  try {
    return std::forward<F>(body)();
  } catch (const Error &e) {
    set_last_error(e.code(), e.what());
    return e.code();
  } catch (const std::bad_alloc &) {
    set_last_error(CXLT_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    return CXLT_ERROR_OUT_OF_HOST_MEMORY;
  } catch (const std::exception &e) {
    set_last_error(CXLT_ERROR_UNKNOWN, e.what());
    return CXLT_ERROR_UNKNOWN;
  } catch (...) {
    set_last_error(CXLT_ERROR_UNKNOWN, "unknown internal error");
    return CXLT_ERROR_UNKNOWN;
  }
}

// Argument check for the C ABI: fail with a message naming the argument.
#define CXLT_CAPI_REQUIRE(cond, msg)                                   \
  do {                                                                \
    if (!(cond)) ::cxltier::fail(CXLT_ERROR_INVALID_ARGUMENT, msg);   \
  } while (0)

}  // namespace cxltier::capi
