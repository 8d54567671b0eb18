// SPDX-License-Identifier: Apache-2.0
// Test helper: the cxltier::Error a callable throws; a test failure when it throws none.
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

}  // namespace cxlt_test
