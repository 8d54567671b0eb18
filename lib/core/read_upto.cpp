// SPDX-License-Identifier: Apache-2.0
// Reading an opened file into a string (read_upto.hpp).
#include "lib/core/read_upto.hpp"

#include <algorithm>
#include <cerrno>
#include <unistd.h>

namespace cxltier {

int read_upto(int fd, std::string &text, size_t upto) {
  char buf[65536];
  while (text.size() < upto) {
    const ssize_t got = ::read(fd, buf, std::min(sizeof buf, upto - text.size()));
    if (got > 0) {
      text.append(buf, static_cast<size_t>(got));
    } else if (got == 0) {
      return 0;
    } else if (errno != EINTR) {
      return errno;
    }
  }
  return 0;
}

}  // namespace cxltier
