// SPDX-License-Identifier: Apache-2.0
// The cxltier command-line tool: each subcommand lives in its own cmd_<name>.cpp and registers
// itself with the App here. Exit status: 0 success, 1 the work ran but a check failed, 2 bad
// input (a flag, a file, a configuration), 3 an internal error.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace cxltier::cli {

constexpr int kExitOk = 0;
constexpr int kExitCheckFailed = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitInternal = 3;

struct Registry {
  struct Entry {
    CLI::App *sub;
    std::function<int()> run;
  };
  std::vector<Entry> entries;
  void add(CLI::App *sub, std::function<int()> run) { entries.push_back({sub, std::move(run)}); }
};

// One per subcommand (tools/cmd_<name>.cpp).
void register_topo(CLI::App &app, Registry &reg);

}  // namespace cxltier::cli
