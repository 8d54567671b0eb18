// SPDX-License-Identifier: Apache-2.0
// cxltier: the program. Everything is in run_cli() (cli.cpp).
#include "commands.hpp"

int main(int argc, char **argv) { return cxltier::cli::run_cli(argc, argv, cxltier::cli::Mode::run); }
