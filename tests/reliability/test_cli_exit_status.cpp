// SPDX-License-Identifier: Apache-2.0
// The CLI's one rule from an error to an exit status (tools/exit_status.hpp): every result code
// maps to 0-3, a backend failing before the job is bad input and during it a finding, and an
// internal error says so on stderr.
#include "exit_status.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <new>
#include <string>

#include <unistd.h>

using namespace cxltier;
using namespace cxltier::cli;

namespace {

// What report_exception prints on stderr for `e`, and the status it returns.
std::pair<int, std::string> report(std::exception_ptr e) {
  std::fflush(stderr);
  std::FILE *tmp = std::tmpfile();
  EXPECT_NE(tmp, nullptr);
  const int saved = dup(2);
  dup2(fileno(tmp), 2);
  const int status = report_exception("probe", e);
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::string text;
  std::rewind(tmp);
  char buf[512];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, tmp)) > 0) text.append(buf, n);
  std::fclose(tmp);
  return {status, text};
}

}  // namespace

TEST(CliExitStatus, EveryResultCodeMapsToADocumentedStatus) {
  for (int c = CXLT_OK; c <= CXLT_ERROR_TIMEOUT; ++c)
    for (Phase p : {Phase::setup, Phase::job}) {
      const int s = exit_status_for(static_cast<cxlt_result_t>(c), p);
      EXPECT_GE(s, 0) << c;
      EXPECT_LE(s, 3) << c;
    }
  EXPECT_EQ(exit_status_for(CXLT_OK, Phase::job), kExitOk);
  EXPECT_EQ(exit_status_for(CXLT_ERROR_CONFIG, Phase::job), kExitBadInput);
  EXPECT_EQ(exit_status_for(CXLT_ERROR_UNKNOWN, Phase::job), kExitInternal);
}

TEST(CliExitStatus, BackendFailureIsBadInputAtSetupAndAFindingDuringTheJob) {
  for (cxlt_result_t c : {CXLT_ERROR_BACKEND, CXLT_ERROR_OUT_OF_TIER_MEMORY, CXLT_ERROR_TIMEOUT}) {
    EXPECT_EQ(exit_status_for(c, Phase::setup), kExitBadInput) << c;
    EXPECT_EQ(exit_status_for(c, Phase::job), kExitCheckFailed) << c;
  }
  // setup() marks what it runs as the setup's, whatever the code.
  try {
    setup([]() -> int { fail(CXLT_ERROR_BACKEND, "NUMA node 9 does not exist"); });
    FAIL() << "setup() swallowed the error";
  } catch (const SetupError &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_BACKEND);
    EXPECT_STREQ(e.what(), "NUMA node 9 does not exist");
  }
  auto [status, text] = report(std::make_exception_ptr(SetupError(CXLT_ERROR_BACKEND, "NUMA node 9 does not exist")));
  EXPECT_EQ(status, kExitBadInput);
  EXPECT_EQ(text, "cxltier probe: error: NUMA node 9 does not exist\n");
  std::tie(status, text) = report(std::make_exception_ptr(Error(CXLT_ERROR_BACKEND, "copy failed")));
  EXPECT_EQ(status, kExitCheckFailed);
  EXPECT_EQ(text, "cxltier probe: error: copy failed\n");
}

TEST(CliExitStatus, InternalErrorsSaySo) {
  auto [status, text] = report(std::make_exception_ptr(std::bad_alloc()));
  EXPECT_EQ(status, kExitInternal);
  EXPECT_EQ(text, "cxltier probe: internal error: out of host memory\n");
  std::tie(status, text) = report(std::make_exception_ptr(Error(CXLT_ERROR_UNKNOWN, "an invariant broke")));
  EXPECT_EQ(status, kExitInternal);
  EXPECT_EQ(text, "cxltier probe: internal error: an invariant broke\n");
  std::tie(status, text) = report(std::make_exception_ptr(42));
  EXPECT_EQ(status, kExitInternal);
  EXPECT_NE(text.find("internal error"), std::string::npos) << text;
}
