// SPDX-License-Identifier: Apache-2.0
// The CLI's one rule from an error to an exit status (exit_status.hpp).
#include "exit_status.hpp"

#include <cstdio>
#include <new>

namespace cxltier::cli {

int exit_status_for(cxlt_result_t code, Phase phase) noexcept {
  switch (code) {
    case CXLT_OK: return kExitOk;
    // What the user gave: flags, files, the configuration and what it names.
    case CXLT_ERROR_INVALID_ARGUMENT:
    case CXLT_ERROR_NOT_FOUND:
    case CXLT_ERROR_NOT_SUPPORTED:
    case CXLT_ERROR_IO:
    case CXLT_ERROR_CORRUPT:
    case CXLT_ERROR_CONFIG:
    case CXLT_ERROR_TOPOLOGY: return kExitBadInput;
    // A tier, its memory or the remote tier failing: before the job began it is the machine not
    // giving what the configuration names (an absent NUMA node, a backend this build lacks, a
    // budget the tier cannot hold); while the job ran it is a problem the job found.
    case CXLT_ERROR_BACKEND:
    case CXLT_ERROR_OUT_OF_TIER_MEMORY:
    case CXLT_ERROR_TIMEOUT: return phase == Phase::setup ? kExitBadInput : kExitCheckFailed;
    // The command misusing the runtime, or the process out of memory: not the user's doing.
    case CXLT_ERROR_BUSY:
    case CXLT_ERROR_CLOSED:
    case CXLT_ERROR_OUT_OF_HOST_MEMORY:
    case CXLT_ERROR_UNKNOWN: return kExitInternal;
  }
  return kExitInternal;
}

int report_exception(const std::string &command, std::exception_ptr e) noexcept {
  int status = kExitInternal;
  const char *what = "an exception of unknown type";
  try {
    std::rethrow_exception(e);
  } catch (const SetupError &err) {
    status = exit_status_for(err.code(), Phase::setup);
    what = err.what();
  } catch (const Error &err) {
    status = exit_status_for(err.code(), Phase::job);
    what = err.what();
  } catch (const std::bad_alloc &) {
    what = "out of host memory";
  } catch (const std::exception &err) {
    what = err.what();
  } catch (...) {
  }
  std::fprintf(stderr, "cxltier %s: %s: %s\n", command.c_str(), status == kExitInternal ? "internal error" : "error", what);
  return status;
}

const char *exit_status_help() noexcept {
  return "Exit status: 0 success; 1 the job ran and found a problem (an integrity error, a policy\n"
         "beating OPT, a tier failing during the job); 2 bad input or usage, named on stderr (a flag,\n"
         "a file, the configuration, a NUMA node or backend this machine lacks, stdout not\n"
         "writable); 3 an internal error (a defect of cxltier, or the host out of memory), said as\n"
         "such on stderr. `run --store` stopped by SIGTERM, SIGINT or SIGHUP checkpoints, then\n"
         "ends by that signal; no other command ends by a signal of its own.";
}

}  // namespace cxltier::cli
