// SPDX-License-Identifier: Apache-2.0
// Where write_attention_trace() writes: a path that is not a regular file (a FIFO here) is
// refused or written through, never replaced.
#include "../common/temp_dir.hpp"

#include <cxltier/error.hpp>
#include <cxltier/tools/trace.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace cxltier;

// The defect this catches: the trace was written to PATH.tmp and renamed over PATH whatever PATH
// was, so a pipe, a device or a symbolic link at PATH was replaced by a regular file (as root,
// `cxltier gen-trace --out /dev/null` replaced the system's /dev/null). Shown here on a FIFO in
// a temporary folder. Either refusing such a path or writing through it is right;
// replacing it is not. A reader end is held open so that writing through the FIFO cannot block.
TEST(TraceWritePaths, GenTraceNeverReplacesANonRegularFile) {
  const cxlt_test::TempDir tmp("trace-write-paths");
  const std::string dir = tmp.path().string();
  const std::string fifo = dir + "/out.jsonl";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  trace::SyntheticParams p;
  p.steps = 2;
  p.sequences = 2;
  p.prompt_tokens_max = 64;
  try {
    trace::write_attention_trace(fifo, p);
  } catch (const Error &) {
    // refusing is a right answer
  }
  ::close(reader);
  struct stat st {};
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << fifo << " (a FIFO) was replaced by another kind of file";
}
