// SPDX-License-Identifier: Apache-2.0
// The cxltier command-line tool: each subcommand lives in its own cmd_<name>.cpp and registers
// itself at start-up with a static Registrar (the one kind of global allowed here, as in
// libcamera's factories). Exit statuses and the one rule from an error to a status:
// exit_status.hpp.
#pragma once

#include "exit_status.hpp"

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace cxltier::cli {

// A subcommand: `setup` adds it to the app (flags, help) and returns the function that runs it
// once parsing succeeded.
using CommandSetup = std::function<std::function<int()>(CLI::App &app)>;

struct CommandInfo {
  int order;  // position in --help
  CommandSetup setup;
};

std::vector<CommandInfo> &command_registry();

// The whole command line (cli.cpp): parses argv, runs the subcommand it names (unless
// parse_only), and returns the exit status. Each call builds its own parser.
enum class Mode { run, parse_only };
int run_cli(int argc, char **argv, Mode mode);

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
