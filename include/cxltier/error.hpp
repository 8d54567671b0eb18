// SPDX-License-Identifier: Apache-2.0
// cxltier::Error: the one exception type of the C++ API. It carries the C ABI's result code so
// the C layer can translate it without guessing, and a message that names what was wrong.
// Hot paths are noexcept; errors are thrown from set-up, validation and I/O paths.
#pragma once

#include <cxltier/cxltier.h>

#include <stdexcept>
#include <string>

namespace cxltier {

class CXLT_API Error : public std::runtime_error {
public:
  Error(cxlt_result_t code, const std::string &message) : std::runtime_error(message), code_(code) {}
  cxlt_result_t code() const noexcept { return code_; }

private:
  cxlt_result_t code_;
};

// Throw an Error with a message built from the arguments (streamed with operator<<). The
// library's own helper, not part of the API: hidden, so that none of its instances is exported
// from libcxltier.so (or from an engine's library that happens to use it).
#if defined(__GNUC__)
#define CXLT_FAIL_HIDDEN __attribute__((visibility("hidden")))
#else
#define CXLT_FAIL_HIDDEN
#endif
template <typename... Args>
[[noreturn]] CXLT_FAIL_HIDDEN void fail(cxlt_result_t code, const Args &...args);

}  // namespace cxltier

#include <sstream>

namespace cxltier {
template <typename... Args>
[[noreturn]] CXLT_FAIL_HIDDEN void fail(cxlt_result_t code, const Args &...args) {
  std::ostringstream os;
  (os << ... << args);
  throw Error(code, os.str());
}
}  // namespace cxltier

#undef CXLT_FAIL_HIDDEN
