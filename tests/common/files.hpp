// SPDX-License-Identifier: Apache-2.0
// Test helpers: a whole file read into a string, and a string written as a whole file, bytes as
// they are (no newline translation).
#pragma once

#include <fstream>
#include <iterator>
#include <string>

namespace cxlt_test {

// The file's bytes; "" when it cannot be opened.
inline std::string read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Replaces the file at `path` with `content`; returns `path`.
inline std::string write_file(const std::string &path, const std::string &content) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
  return path;
}

}  // namespace cxlt_test
