// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the command line of every subcommand, parsed in-process by the program's own
// run_cli() (tools/cli.cpp) without running the command. The input is the argument words, one
// per line (at most 32 words of 512 bytes); "cxltier" is prepended. Any argv must be accepted
// (0) or refused with exit 2 and a message, never crash, throw out of the parser or give another
// status.
#include "fuzz_util.hpp"

#include "commands.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  // --help and the parse errors print; the output is not what is checked.
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null >= 0) {
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::close(null);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<std::string> words{"cxltier"};
  std::string cur;
  for (size_t i = 0; i <= size && words.size() <= 32; ++i) {
    if (i == size || data[i] == '\n') {
      words.push_back(cur);
      cur.clear();
    } else if (cur.size() < 512) {
      cur += static_cast<char>(data[i]);
    }
  }
  if (size == 0) words.pop_back();  // no words at all: `cxltier` alone
  std::vector<char *> argv;
  for (std::string &w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const int rc = cxltier::cli::run_cli(static_cast<int>(words.size()), argv.data(), cxltier::cli::Mode::parse_only);
  std::string line;
  for (const std::string &w : words) line += "'" + w + "' ";
  FUZZ_CHECK(rc == cxltier::cli::kExitOk || rc == cxltier::cli::kExitBadInput, "exit status %d for %s", rc, line.c_str());
  return 0;
}
