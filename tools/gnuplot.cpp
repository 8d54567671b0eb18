// SPDX-License-Identifier: Apache-2.0
// gnuplot with its output opened here and user text only as literals (gnuplot.hpp).
#include "gnuplot.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char **environ;

namespace cxltier::cli {

std::string gnuplot_literal(const std::string &s) {
  std::string o = "'";
  for (char c : s) {
    if (c == '\'') {
      o += "''";
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      o += ' ';
    } else {
      o += c;
    }
  }
  return o + "'";
}

std::string run_gnuplot(const std::string &script_path, const std::string &output) {
  int fd = ::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd < 0) return "cannot write " + output + ": " + std::strerror(errno);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fd, 1);
  std::vector<std::string> args{"gnuplot", script_path};
  std::vector<char *> argv;
  for (std::string &a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, "gnuplot", &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(fd);
  if (rc != 0)
    return "gnuplot could not be started (" + std::string(std::strerror(rc)) +
           "); install gnuplot-nox (scripts/common.sh does)";
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return "gnuplot failed on " + script_path + " (exit status " +
           std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)) + "; its messages are above)";
  return "";
}

}  // namespace cxltier::cli
