// SPDX-License-Identifier: Apache-2.0
// Test helper: run the cxltier CLI (path in $CXLT_TOOL, set by tests/meson.build) with
// arguments, capture stdout, stderr and the exit status. No shell is involved.
#pragma once

#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char **environ;

namespace cxlt_test {

struct ToolResult {
  int status = -1;  // exit status, or 128 + signal
  std::string out;
  std::string err;
};

inline std::string tool_path() {
  const char *p = std::getenv("CXLT_TOOL");
  return p ? p : "cxltier";
}

// A program started by start_program, not yet waited for.
struct Started {
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1;
  std::string spawn_error;
};

// Start `program args...` (stdout and stderr to pipes); extra_env entries are "NAME=value"
// strings added to the environment. SIGPIPE is reset to its default action in the child, so
// a test sees the signal a real host process would take, whatever its own disposition.
inline Started start_program(const std::string &program, const std::vector<std::string> &args,
                             const std::vector<std::string> &extra_env = {}) {
  Started s;
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return s;
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return s;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  std::vector<std::string> argv_s{program};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char *> argv;
  for (auto &a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  for (char **e = environ; *e; ++e) env_s.emplace_back(*e);
  env_s.insert(env_s.end(), extra_env.begin(), extra_env.end());
  std::vector<char *> envp;
  for (auto &e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  int rc = posix_spawn(&s.pid, program.c_str(), &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    s.pid = -1;
    s.spawn_error = "spawn failed";
    return s;
  }
  s.out_fd = out_pipe[0];
  s.err_fd = err_pipe[0];
  return s;
}

// Collect a started program's output until it closes both pipes, then its exit status.
inline ToolResult finish_program(Started &s) {
  ToolResult r;
  if (s.pid < 0) {
    r.err = s.spawn_error.empty() ? "spawn failed" : s.spawn_error;
    return r;
  }
  pollfd fds[2] = {{s.out_fd, POLLIN, 0}, {s.err_fd, POLLIN, 0}};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  waitpid(s.pid, &status, 0);
  s.pid = -1;
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// Run `program args...` (program defaults to the cxltier CLI) to completion.
inline ToolResult run_program(const std::string &program, const std::vector<std::string> &args,
                              const std::vector<std::string> &extra_env = {}) {
  Started s = start_program(program, args, extra_env);
  return finish_program(s);
}

inline ToolResult run_tool(const std::vector<std::string> &args, const std::vector<std::string> &extra_env = {}) {
  return run_program(tool_path(), args, extra_env);
}

}  // namespace cxlt_test
