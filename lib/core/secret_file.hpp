// SPDX-License-Identifier: Apache-2.0
// Reading a small secret (a password) from a file without trusting the file: never blocks on a
// FIFO, never reads a device or an unbounded file into memory.
#pragma once

#include <cstddef>
#include <string>

namespace cxltier {

constexpr size_t kMaxPasswordFileBytes = 4096;

// The first line of `path` (a trailing CR or LF removed). Throws Error(CXLT_ERROR_CONFIG),
// with `what` (the option that named the file) in the message, when the file cannot be opened,
// is not a regular file (a FIFO, a device, a directory), is larger than kMaxPasswordFileBytes,
// or its first line is empty.
std::string read_password_file(const std::string &path, const std::string &what);

}  // namespace cxltier
