// SPDX-License-Identifier: Apache-2.0
// What tests/remote/cluster.sh tells the tests it runs: the environment variables naming the
// cluster's ports, PID files and folder, and where redis-cli is.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/types.h>
#include <unistd.h>
#include <vector>

namespace cxlt_test {

inline std::string env(const char *name) {
  const char *v = std::getenv(name);
  return v ? v : "";
}

// Every server's port, masters and replicas (CXLT_TEST_REDIS_PORTS).
inline std::vector<uint16_t> cluster_ports() {
  std::vector<uint16_t> out;
  std::istringstream in(env("CXLT_TEST_REDIS_PORTS"));
  unsigned p;
  while (in >> p) out.push_back(static_cast<uint16_t>(p));
  return out;
}

// The PID of the server on `port`, from the file cluster.sh (or its restart.sh) wrote.
inline pid_t server_pid(uint16_t port) {
  std::ifstream in(env("CXLT_TEST_REDIS_DIR") + "/" + std::to_string(port) + ".pid");
  long pid = 0;
  in >> pid;
  return static_cast<pid_t>(pid);
}

// The first executable `prog` on PATH (the name itself if none).
inline std::string which(const std::string &prog) {
  std::istringstream path(env("PATH"));
  std::string dir;
  while (std::getline(path, dir, ':')) {
    std::string p = dir + "/" + prog;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return prog;
}

}  // namespace cxlt_test
