// SPDX-License-Identifier: Apache-2.0
// The exit status of every cxltier command, decided in one place (exit_status.cpp; the table is
// in README.md, "Exit status", and at the end of `cxltier --help`):
//   0  success
//   1  the job ran and found a problem: an integrity error, a policy beating the OPT bound, a
//      tier or the remote tier failing while the job ran
//   2  bad input or usage, named on stderr: a flag, a file, a configuration, a machine lacking
//      what the configuration names (a NUMA node, a backend), stdout not writable
//   3  an internal error (a defect of cxltier, or the host out of memory): stderr says
//      "internal error"
// No command ends by a signal of its own, with one exception: `cxltier run --store` stopped by
// SIGTERM, SIGINT or SIGHUP writes its final checkpoint and then raises that signal again with
// its default action, so the parent sees how the run ended.
#pragma once

#include <cxltier/cxltier.h>
#include <cxltier/error.hpp>

#include <exception>
#include <string>

namespace cxltier::cli {

constexpr int kExitOk = 0;
constexpr int kExitCheckFailed = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitInternal = 3;

// When an error was raised: while the command read its input and set the job up (the
// configuration, the topology, opening the runtime and its backends), or while the job ran.
enum class Phase { setup, job };

// The exit status for an error the library raised with `code`.
int exit_status_for(cxlt_result_t code, Phase phase) noexcept;

// An error raised while setting the job up (see setup()): the library's code and message.
class SetupError : public Error {
public:
  using Error::Error;
};

// Runs `f` (reading input, opening a runtime) so that an error it raises counts as the setup's:
// a backend that cannot give what the configuration names is bad input (2), not a failed job.
template <class F>
auto setup(F &&f) -> decltype(f()) {
  try {
    return f();
  } catch (const SetupError &) {
    throw;
  } catch (const Error &e) {
    throw SetupError(e.code(), e.what());
  }
}

// Prints one line on stderr for the exception `e` that command `command` let out ("cxltier run:
// error: ...", or "cxltier run: internal error: ..." for status 3) and returns its exit status.
int report_exception(const std::string &command, std::exception_ptr e) noexcept;

// The table above, for the end of `cxltier --help`.
const char *exit_status_help() noexcept;

}  // namespace cxltier::cli
