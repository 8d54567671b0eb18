// SPDX-License-Identifier: Apache-2.0
// Running gnuplot on a script without handing it user text as code: the output file is opened
// here and given to gnuplot as its stdout (the script has no `set output`), and every other
// piece of text (titles, labels) goes in as a single-quoted literal, in which gnuplot does no
// escape, backquote or macro processing.
#pragma once

#include <string>

namespace cxltier::cli {

// `s` as a gnuplot single-quoted string literal: quotes doubled, control characters (a newline
// would end the command) replaced by spaces. Use with `noenhanced` where it is shown, so that
// '_' and '^' are not read as sub- and superscripts.
std::string gnuplot_literal(const std::string &s);

// Run `gnuplot script_path` with stdout written to `output` (created or truncated, mode 0644).
// Returns "" or why it failed; gnuplot's own messages go to stderr.
std::string run_gnuplot(const std::string &script_path, const std::string &output);

}  // namespace cxltier::cli
