// SPDX-License-Identifier: Apache-2.0
// Open-time checks and the exclusive lock of a score-store file (store_file.hpp).
#include "lib/store/store_file.hpp"

#include <cxltier/error.hpp>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cxltier {

namespace {

const char *file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISLNK(m)) return "a symbolic link";
  return "not a regular file";
}

std::string parent_of(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

void check_store_writable(const std::string &path) {
  if (path.empty()) fail(CXLT_ERROR_IO, "store.path is empty");
  const std::string dir = parent_of(path);
  struct stat ds {};
  if (stat(dir.c_str(), &ds) != 0)
    fail(CXLT_ERROR_IO, "store.path ", path, ": its directory ", dir, " cannot be used: ", std::strerror(errno));
  if (!S_ISDIR(ds.st_mode)) fail(CXLT_ERROR_IO, "store.path ", path, ": ", dir, " is not a directory");
  // A checkpoint is a new file in this directory renamed over the old one.
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    fail(CXLT_ERROR_IO, "store.path ", path, ": no checkpoint could be written, its directory ", dir,
         " is not writable: ", std::strerror(errno));
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;  // the first checkpoint creates it
    fail(CXLT_ERROR_IO, "store.path ", path, ": ", std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode))
    fail(CXLT_ERROR_IO, "store.path ", path, " is ", file_kind(st.st_mode), "; a score store is a regular file");
  // An immutable or append-only file (chattr) cannot be replaced even by root; access() says
  // so with EPERM. A file without write permission is taken as not to be overwritten.
  if (access(path.c_str(), W_OK) != 0)
    fail(CXLT_ERROR_IO, "store.path ", path, " is not writable: ", std::strerror(errno),
         "; no checkpoint could replace it");
}

StoreLock::StoreLock(const std::string &path) {
  const std::string lock = path + ".lock";
  int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
  if (fd < 0) fail(CXLT_ERROR_IO, "store.path ", path, ": cannot open its lock file ", lock, ": ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(CXLT_ERROR_IO, "store.path ", path, ": its lock file ", lock, " is not a regular file");
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char holder[32] = {};
    ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
    ::close(fd);
    std::string who = "another process";
    if (n > 0) {
      holder[n] = '\0';
      holder[std::strcspn(holder, "\n")] = '\0';
      if (holder[0] != '\0' && std::strspn(holder, "0123456789") == std::strlen(holder))
        who = std::string("process ") + holder;
    }
    if (err == EWOULDBLOCK)
      fail(CXLT_ERROR_IO, "store.path ", path, " is in use by ", who, " (it holds ", lock,
           "); two runtimes on one store would overwrite each other's checkpoints");
    fail(CXLT_ERROR_IO, "store.path ", path, ": cannot lock ", lock, ": ", std::strerror(err));
  }
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    // The lock holds without the note; only the name in a second holder's refusal is lost.
  }
  fd_ = fd;
}

StoreLock &StoreLock::operator=(StoreLock &&o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

StoreLock::~StoreLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

}  // namespace cxltier
