// SPDX-License-Identifier: Apache-2.0
// The password file reader (secret_file.hpp).
#include "lib/core/secret_file.hpp"

#include "lib/core/read_upto.hpp"

#include <cxltier/error.hpp>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cxltier {

std::string read_password_file(const std::string &path, const std::string &what) {
  // O_NONBLOCK: a FIFO opens at once (and fstat refuses it) instead of waiting for a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) fail(CXLT_ERROR_CONFIG, what, " = '", path, "' cannot be read: ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(CXLT_ERROR_CONFIG, what, " = '", path, "' is not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxPasswordFileBytes) {
    ::close(fd);
    fail(CXLT_ERROR_CONFIG, what, " = '", path, "' is ", static_cast<uint64_t>(st.st_size),
         " bytes; a password file holds at most ", kMaxPasswordFileBytes);
  }
  std::string buf;
  const int err = read_upto(fd, buf, kMaxPasswordFileBytes + 1);
  ::close(fd);
  if (err != 0) fail(CXLT_ERROR_CONFIG, what, " = '", path, "' cannot be read: ", std::strerror(err));
  if (buf.size() > kMaxPasswordFileBytes)  // grew since fstat
    fail(CXLT_ERROR_CONFIG, what, " = '", path, "' is larger than ", kMaxPasswordFileBytes, " bytes");
  std::string line = buf.substr(0, buf.find('\n'));
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
  if (line.empty()) fail(CXLT_ERROR_CONFIG, what, " = '", path, "': the first line is empty");
  if (line.find('\0') != std::string::npos) fail(CXLT_ERROR_CONFIG, what, " = '", path, "': the password holds a NUL byte");
  return line;
}

}  // namespace cxltier
