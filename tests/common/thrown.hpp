// SPDX-License-Identifier: Apache-2.0
// Test helpers: the cxltier::Error a callable throws, or its code.
#pragma once

#include <cxltier/error.hpp>

#include <gtest/gtest.h>

namespace cxlt_test {

template <typename F>
cxltier::Error thrown(F &&f) {
  try {
    f();
  } catch (const cxltier::Error &e) {
    return e;
  }
  ADD_FAILURE() << "no cxltier::Error thrown";
  return cxltier::Error(CXLT_OK, "");
}

// The code of the cxltier::Error a callable throws; CXLT_OK when it throws none.
template <typename F>
cxlt_result_t code_of(F &&f) {
  try {
    f();
  } catch (const cxltier::Error &e) {
    return e.code();
  }
  return CXLT_OK;
}

}  // namespace cxlt_test
