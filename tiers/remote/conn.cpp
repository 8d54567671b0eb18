// SPDX-License-Identifier: Apache-2.0
// One connection to one Redis server (conn.hpp): non-blocking socket, poll() with deadlines,
// sendmsg() out (MSG_NOSIGNAL: a peer that died gives EPIPE, never SIGPIPE for the host
// process), payloads read straight into their destination, hiredis for small replies.
#include "tiers/remote/conn.hpp"

#include <hiredis/hiredis.h>
#include <hiredis/read.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

namespace cxltier::remote {

const char *io_name(Io r) noexcept {
  switch (r) {
    case Io::ok: return "ok";
    case Io::timeout: return "timed out";
    case Io::closed: return "connection closed by the server";
    case Io::error: return "socket or protocol error";
  }
  return "?";
}

namespace {

int ms_left(Deadline dl) {
  auto left = std::chrono::duration_cast<std::chrono::microseconds>(dl - Clock::now()).count();
  if (left <= 0) return 0;
  return static_cast<int>(std::min<long long>((left + 999) / 1000, INT_MAX));
}

Reply convert(const redisReply *r) {
  Reply out;
  switch (r->type) {
    case REDIS_REPLY_STATUS: out.type = Reply::status; out.str.assign(r->str, r->len); break;
    case REDIS_REPLY_ERROR: out.type = Reply::error; out.str.assign(r->str, r->len); break;
    case REDIS_REPLY_INTEGER: out.type = Reply::integer; out.integer_value = r->integer; break;
    case REDIS_REPLY_NIL: out.type = Reply::nil; break;
    case REDIS_REPLY_STRING: out.type = Reply::string; out.str.assign(r->str, r->len); break;
    case REDIS_REPLY_ARRAY:
      out.type = Reply::array;
      out.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(convert(r->element[i]));
      break;
    default: out.type = Reply::other; break;
  }
  return out;
}

struct ReaderFree {
  void operator()(redisReader *r) const noexcept { redisReaderFree(r); }
};

}  // namespace

std::string resp_command(const std::vector<std::string> &args) {
  std::string s = "*" + std::to_string(args.size()) + "\r\n";
  for (const std::string &a : args) {
    s += "$" + std::to_string(a.size()) + "\r\n";
    s += a;
    s += "\r\n";
  }
  return s;
}

Conn::~Conn() { close(); }

void Conn::close() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  head_ = tail_ = 0;
}

bool Conn::open(const std::string &host, uint16_t port, Deadline dl, const Auth &auth, std::string *err) {
  close();
  peer_ = host + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo *res = nullptr;
  // Numeric addresses resolve without a lookup; names go through the system resolver (which
  // has its own timeouts: production configurations should list addresses).
  int g = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (g != 0) {
    *err = peer_ + ": cannot resolve: " + gai_strerror(g);
    return false;
  }
  std::string last = "no address";
  for (addrinfo *ai = res; ai != nullptr; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last = std::strerror(errno);
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno != EINPROGRESS) {
      last = std::strerror(errno);
      ::close(fd);
      continue;
    }
    fd_ = fd;
    if (rc != 0) {
      Io w = wait(POLLOUT, dl);
      int so = 0;
      socklen_t len = sizeof so;
      if (w != Io::ok) {
        last = w == Io::timeout ? "connect timed out" : "connect failed";
        close();
        continue;
      }
      if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &len) != 0 || so != 0) {
        last = std::strerror(so ? so : errno);
        close();
        continue;
      }
    }
    break;
  }
  freeaddrinfo(res);
  if (fd_ < 0) {
    *err = peer_ + ": " + last;
    return false;
  }
  if (!auth.password.empty()) {
    std::vector<std::string> cmd{"AUTH"};
    if (!auth.user.empty()) cmd.push_back(auth.user);
    cmd.push_back(auth.password);
    Reply r;
    Io io = send(resp_command(cmd), dl);
    if (io == Io::ok) io = read_reply(&r, dl);
    if (io != Io::ok || r.type != Reply::status) {
      *err = peer_ + ": AUTH failed: " + (io != Io::ok ? io_name(io) : r.str);
      close();
      return false;
    }
  }
  return true;
}

Io Conn::wait(short events, Deadline dl) {
  while (true) {
    pollfd p{fd_, events, 0};
    int n = ::poll(&p, 1, ms_left(dl));
    if (n > 0) {
      if (p.revents & (events | POLLHUP)) return Io::ok;  // a read sees the EOF
      return Io::error;
    }
    if (n == 0) return Io::timeout;
    if (errno != EINTR) return Io::error;
  }
}

Io Conn::send(struct iovec *iov, int n, Deadline dl) {
  if (fd_ < 0) return Io::error;
  while (n > 0) {
    // sendmsg rather than writev: only it takes MSG_NOSIGNAL. A library must not take a
    // signal for its host, nor change the host's signal dispositions to avoid one.
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(std::min(n, IOV_MAX));
    ssize_t w = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (Io r = wait(POLLOUT, dl); r != Io::ok) return r;
        continue;
      }
      return errno == EPIPE || errno == ECONNRESET ? Io::closed : Io::error;
    }
    auto left = static_cast<size_t>(w);
    while (n > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --n;
    }
    if (n > 0) {
      iov->iov_base = static_cast<char *>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return Io::ok;
}

Io Conn::send(const std::string &bytes, Deadline dl) {
  iovec v{const_cast<char *>(bytes.data()), bytes.size()};
  return send(&v, 1, dl);
}

Io Conn::fill(Deadline dl) {
  if (fd_ < 0) return Io::error;
  if (head_ == tail_) head_ = tail_ = 0;
  if (tail_ == buf_.size()) {
    if (head_ > 0) {
      std::memmove(buf_.data(), buf_.data() + head_, tail_ - head_);
      tail_ -= head_;
      head_ = 0;
    } else {
      buf_.resize(buf_.size() * 2);  // one line longer than the buffer (a huge error text)
    }
  }
  while (true) {
    ssize_t r = ::recv(fd_, buf_.data() + tail_, buf_.size() - tail_, 0);
    if (r > 0) {
      tail_ += static_cast<size_t>(r);
      return Io::ok;
    }
    if (r == 0) return Io::closed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (Io w = wait(POLLIN, dl); w != Io::ok) return w;
      continue;
    }
    return errno == ECONNRESET ? Io::closed : Io::error;
  }
}

Io Conn::peek(char *c, Deadline dl) {
  while (head_ == tail_)
    if (Io r = fill(dl); r != Io::ok) return r;
  *c = buf_[head_];
  return Io::ok;
}

Io Conn::read_line(std::string *line, Deadline dl) {
  size_t scanned = head_;
  while (true) {
    for (size_t i = scanned; i + 1 < tail_; ++i)
      if (buf_[i] == '\r' && buf_[i + 1] == '\n') {
        line->assign(buf_.data() + head_, i - head_);
        head_ = i + 2;
        return Io::ok;
      }
    scanned = tail_ > head_ ? tail_ - 1 : head_;
    size_t before = head_;
    if (Io r = fill(dl); r != Io::ok) return r;
    scanned -= before - head_;  // fill() may have moved the bytes to the front
  }
}

Io Conn::read_exact(void *dst, size_t n, Deadline dl) {
  auto *p = static_cast<char *>(dst);
  size_t have = std::min(n, tail_ - head_);
  std::memcpy(p, buf_.data() + head_, have);
  head_ += have;
  p += have;
  n -= have;
  while (n > 0) {
    ssize_t r = ::recv(fd_, p, n, 0);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return Io::closed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (Io w = wait(POLLIN, dl); w != Io::ok) return w;
      continue;
    }
    return errno == ECONNRESET ? Io::closed : Io::error;
  }
  return Io::ok;
}

Io Conn::skip(size_t n, Deadline dl) {
  while (n > 0) {
    if (head_ == tail_)
      if (Io r = fill(dl); r != Io::ok) return r;
    size_t take = std::min(n, tail_ - head_);
    head_ += take;
    n -= take;
  }
  return Io::ok;
}

Io Conn::read_reply(Reply *out, Deadline dl) {
  std::unique_ptr<redisReader, ReaderFree> reader(redisReaderCreate());
  if (!reader) return Io::error;
  while (true) {
    if (head_ < tail_) {
      if (redisReaderFeed(reader.get(), buf_.data() + head_, tail_ - head_) != REDIS_OK) return Io::error;
      head_ = tail_ = 0;
    }
    void *reply = nullptr;
    if (redisReaderGetReply(reader.get(), &reply) != REDIS_OK) {
      close();  // the stream is out of step: nothing after this can be trusted
      return Io::error;
    }
    if (reply != nullptr) {
      *out = convert(static_cast<redisReply *>(reply));
      freeReplyObject(reply);
      // Give back what the reader did not consume (the next replies of a pipeline).
      redisReader *r = reader.get();
      size_t rest = r->len - r->pos;
      if (rest > 0) {
        if (buf_.size() < rest) buf_.resize(rest);
        std::memcpy(buf_.data(), r->buf + r->pos, rest);
        head_ = 0;
        tail_ = rest;
      }
      return Io::ok;
    }
    if (Io f = fill(dl); f != Io::ok) return f;
  }
}

}  // namespace cxltier::remote
