// SPDX-License-Identifier: Apache-2.0
// The cxltier command-line tool: each subcommand lives in its own cmd_<name>.cpp and registers
// itself at start-up with a static Registrar (the one kind of global allowed here, as in
// libcamera's factories). Exit status: 0 success, 1 the work ran but a check failed, 2 bad
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

// A subcommand: `setup` adds it to the app (flags, help) and returns the function that runs it
// once parsing succeeded.
using CommandSetup = std::function<std::function<int()>(CLI::App &app)>;

struct CommandInfo {
  int order;  // position in --help
  CommandSetup setup;
};

std::vector<CommandInfo> &command_registry();

// For flags whose empty value would silently mean their default (--topology '' is not auto):
// the empty text is refused at parsing, naming the flag (exit 2).
inline CLI::Validator non_empty(const std::string &flag) {
  return CLI::Validator(
      [flag](std::string &v) { return v.empty() ? flag + " is empty; give a value or leave the flag out" : std::string(); },
      "", "non-empty");
}

struct Registrar {
  Registrar(int order, CommandSetup setup) { command_registry().push_back({order, std::move(setup)}); }
};

}  // namespace cxltier::cli
