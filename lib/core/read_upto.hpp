// SPDX-License-Identifier: Apache-2.0
// Reading an opened file into a string, up to a size: what the readers of topology, checkpoint
// and password files share after they have opened the file and checked its descriptor.
#pragma once

#include <cstddef>
#include <string>

namespace cxltier {

// Reads from `fd`, appending to `text`, until `text` holds `upto` bytes or the file ends (an
// interrupted read is retried). Returns 0, or the errno of a read that failed (what was read
// before it stays in `text`). Throws only std::bad_alloc.
int read_upto(int fd, std::string &text, size_t upto);

}  // namespace cxltier
