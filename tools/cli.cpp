// SPDX-License-Identifier: Apache-2.0
// cxltier's command line: parses with CLI11, dispatches to the subcommand, and turns errors
// into one line on stderr and an exit status (the one rule: exit_status.hpp). main.cpp calls
// it for the program; the argv fuzzer (tests/fuzz/fuzz_cli_args.cpp) calls it in-process.
#include "commands.hpp"

#include <cxltier/cxltier.h>

#include "cxlt_config.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <string>

namespace cxltier::cli {
std::vector<CommandInfo> &command_registry() {
  static std::vector<CommandInfo> registry;
  return registry;
}

int run_cli(int argc, char **argv, Mode mode) {
  CLI::App app{"cxltier: a memory-tier runtime for LLM KV caches (HBM, DRAM, CXL-attached DRAM, NVM, GPU memory)",
               "cxltier"};
  app.set_version_flag("--version", CXLT_VERSION_STRING);
  app.require_subcommand(1);
  app.footer(exit_status_help());
  auto &registry = command_registry();
  std::stable_sort(registry.begin(), registry.end(),
                   [](const CommandInfo &a, const CommandInfo &b) { return a.order < b.order; });
  std::vector<std::pair<CLI::App *, std::function<int()>>> runners;
  for (const CommandInfo &c : registry) {
    size_t before = app.get_subcommands({}).size();
    auto run = c.setup(app);
    auto subs = app.get_subcommands({});
    if (subs.size() == before + 1) runners.emplace_back(subs.back(), std::move(run));
  }
  // A first word that is neither a flag nor a subcommand: say so, and list the subcommands
  // (CLI11 alone says only that a subcommand is required).
  const bool known = argc > 1 && std::any_of(runners.begin(), runners.end(), [&](const auto &r) {
    return r.first->check_name(argv[1]);
  });
  if (argc > 1 && argv[1][0] != '-' && !known) {
    std::string names;
    for (const auto &[sub, run] : runners) names += (names.empty() ? "" : ", ") + sub->get_name();
    std::fprintf(stderr, "cxltier: unknown subcommand '%s' (the subcommands: %s; see cxltier --help)\n", argv[1],
                 names.c_str());
    return kExitBadInput;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitBadInput;
  }
  if (mode == Mode::parse_only) return kExitOk;
  for (auto &[sub, run] : runners) {
    if (!sub->parsed()) continue;
    try {
      const int rc = run();
      // Output that could not be written is a failure with a message, whatever the command.
      if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
        std::fprintf(stderr, "cxltier %s: error: writing to stdout failed: %s\n", sub->get_name().c_str(),
                     std::strerror(errno));
        return kExitBadInput;
      }
      return rc;
    } catch (...) {
      return report_exception(sub->get_name(), std::current_exception());
    }
  }
  return kExitBadInput;
}

}  // namespace cxltier::cli
