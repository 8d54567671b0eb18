// SPDX-License-Identifier: Apache-2.0
// The score store's file on disk, apart from its format (score_store.cpp): the checks made at
// open so that a checkpoint that can never be written is refused there rather than lost at
// close, and the lock that keeps two runtimes from sharing one store.
#pragma once

#include <string>

namespace cxltier {

// Throws Error(CXLT_ERROR_IO) naming the reason when a checkpoint could not be written to
// `path`: its directory is missing, not a directory or not writable (permissions, a read-only
// file system, an immutable directory); or the file exists and is not a regular file, or is not
// writable (permissions, chattr +i). Never blocks: FIFOs and devices are refused from their
// lstat, never opened.
void check_store_writable(const std::string &path);

// An exclusive flock on `<path>.lock`, held for the life of the object. The holder's process
// id is written into the lock file, so a second runtime on the same store is refused with
// Error(CXLT_ERROR_IO) naming it. The lock file stays beside the store (an unlocked one is
// harmless and taken over by the next holder); the kernel drops the lock when the holder dies.
class StoreLock {
public:
  StoreLock() = default;
  explicit StoreLock(const std::string &path);
  StoreLock(StoreLock &&o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  StoreLock &operator=(StoreLock &&o) noexcept;
  StoreLock(const StoreLock &) = delete;
  StoreLock &operator=(const StoreLock &) = delete;
  ~StoreLock();

private:
  int fd_ = -1;
};

}  // namespace cxltier
