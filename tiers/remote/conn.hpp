// SPDX-License-Identifier: Apache-2.0
// One connection to one Redis server: a non-blocking socket, every wait a poll() bounded by
// the caller's deadline, sendmsg() for requests (a value's bytes go from tier memory to the
// socket with no copy), and a small receive buffer that bulk payloads bypass: read_exact()
// drains what is buffered, then reads the rest straight into the destination.
//
// Reply parsing: hiredis's reader parses every reply that is not a GET's payload (status and
// error lines, integers, the arrays of CLUSTER SLOTS). We feed it what we have buffered and
// take back what it did not consume, so it works inside a pipeline too.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct iovec;
struct redisReply;

namespace cxltier::remote {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

enum class Io : uint8_t {
  ok,
  timeout,  // the deadline passed
  closed,   // the peer closed the connection
  error,    // a socket error, or a reply we cannot parse
};
const char *io_name(Io r) noexcept;

// A parsed small reply (what we keep of hiredis's redisReply).
struct Reply {
  enum Type : uint8_t { status, error, integer, nil, string, array, other } type = other;
  std::string str;             // status, error, string
  long long integer_value = 0;
  std::vector<Reply> elements; // array
};

struct Auth {
  std::string user;      // empty: AUTH password (the default user)
  std::string password;  // empty: no AUTH
};

class Conn {
public:
  Conn() = default;
  ~Conn();
  Conn(const Conn &) = delete;
  Conn &operator=(const Conn &) = delete;

  // Connect within the deadline (TCP_NODELAY), then AUTH when a password is given. False
  // with *err naming the address and the reason.
  bool open(const std::string &host, uint16_t port, Deadline dl, const Auth &auth, std::string *err);
  bool is_open() const noexcept { return fd_ >= 0; }
  void close() noexcept;

  // Send every byte of the iovecs (they may be modified: partial writes advance them).
  Io send(struct iovec *iov, int n, Deadline dl);
  Io send(const std::string &bytes, Deadline dl);
  // The first byte of the next reply, without consuming it.
  Io peek(char *c, Deadline dl);
  // One CRLF-terminated line, without the CRLF.
  Io read_line(std::string *line, Deadline dl);
  // Exactly n bytes into dst: the buffered ones first, then straight from the socket.
  Io read_exact(void *dst, size_t n, Deadline dl);
  // Read and forget n bytes.
  Io skip(size_t n, Deadline dl);
  // One whole reply of any type, parsed by hiredis.
  Io read_reply(Reply *out, Deadline dl);

  const std::string &peer() const noexcept { return peer_; }
  int fd() const noexcept { return fd_; }

private:
  Io fill(Deadline dl);  // read more into the buffer (at least one byte)
  Io wait(short events, Deadline dl);

  int fd_ = -1;
  std::string peer_;
  std::vector<char> buf_ = std::vector<char>(64 * 1024);
  size_t head_ = 0, tail_ = 0;  // buffered bytes are buf_[head_, tail_)
};

// A command as RESP ("*2\r\n$3\r\nGET\r\n$..."), for commands without a large argument.
std::string resp_command(const std::vector<std::string> &args);

}  // namespace cxltier::remote
