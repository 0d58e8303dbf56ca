#pragma once
// Issue 13's HTTP attacks, shared by the reliability suite (one attack at a
// time) and the soak (all at once): bodies streamed after a refused head,
// request heads sent at 1 byte a second, and fetchers that never read.

#include "raw_http.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace kcache::testing {

struct BodyAttack {
  int early_status = 0;   // the answer that came after the head alone (0: none in 2 s)
  std::uint64_t sent = 0; // body bytes the server took before closing
};

// Sends `head` (which announces a large body), waits up to 2 s for an early
// answer, then streams `megabytes` MiB of body or until the server closes.
inline BodyAttack stream_body(int port, const std::string& head, int megabytes,
                              const char* source = "127.0.0.1") {
  BodyAttack out;
  const int fd = connect_from(port, source);
  if (fd < 0 || !send_all(fd, head)) {
    if (fd >= 0) {
      close(fd);
    }
    return out;
  }
  out.early_status = status_of(read_response(fd, std::chrono::seconds(2)));
  const std::string chunk(1 << 20, 'x');
  for (int mb = 0; mb < megabytes && send_all(fd, chunk); ++mb) {
    out.sent += chunk.size();
  }
  close(fd);
  return out;
}

// `n` connections from `source`, each with a small receive buffer, that send
// `request` and never read the answer; the caller closes them.
inline std::vector<int> open_non_readers(int port, const char* source, const std::string& request,
                                         int n) {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    const int fd = connect_from(port, source, 4096);
    if (fd < 0) {
      break;
    }
    send_all(fd, request);
    fds.push_back(fd);
  }
  return fds;
}

// Slow request heads from one address, opened over and over: 1 byte a second.
class SlowHeaders {
public:
  SlowHeaders(int port, const char* source, int connections) : port_(port), source_(source) {
    slots_.resize(static_cast<std::size_t>(connections));
    thread_ = std::thread([this] { run(); });
  }
  ~SlowHeaders() {
    stop_ = true;
    thread_.join();
    for (Slot& s : slots_) {
      if (s.fd >= 0) {
        close(s.fd);
      }
    }
  }
  SlowHeaders(const SlowHeaders&) = delete;
  SlowHeaders& operator=(const SlowHeaders&) = delete;

  // How long the server kept the slow connections it ended, at most.
  double longest_life_s() const { return longest_s_.load(); }
  int opened() const { return opened_.load(); }
  // Slow connections the server ended (timeouts, evictions, refusals).
  int ended() const { return ended_.load(); }

private:
  using Clock = std::chrono::steady_clock;
  struct Slot {
    int fd = -1;
    Clock::time_point opened;
    Clock::time_point last_byte;
    Clock::time_point retry_at;
    std::size_t sent = 0;
  };

  void run() {
    using namespace std::chrono_literals;
    const std::string head = "GET /v1/stats HTTP/1.1\r\nHost: slow\r\nX-Pad: ";
    std::vector<pollfd> polls;
    std::vector<Slot*> polled;
    while (!stop_) {
      auto now = Clock::now();
      polls.clear();
      polled.clear();
      for (Slot& s : slots_) {
        if (s.fd < 0 && now >= s.retry_at) {
          s.fd = connect_from(port_, source_);
          s.opened = now;
          s.last_byte = now - 1s;
          s.sent = 0;
          ++opened_;
        }
        if (s.fd >= 0) {
          polls.push_back({s.fd, POLLIN, 0});
          polled.push_back(&s);
        }
      }
      // One wait for all: the attacker's own CPU must not slow the server's host.
      poll(polls.data(), polls.size(), 50);
      now = Clock::now();
      for (std::size_t i = 0; i < polls.size(); ++i) {
        Slot& s = *polled[i];
        if ((polls[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
          // Closed by the server (EOF or a 503).
          char buf[512];
          const ssize_t n = recv(s.fd, buf, sizeof buf, MSG_DONTWAIT);
          if (n <= 0) {
            longest_s_ =
                std::max(longest_s_.load(), std::chrono::duration<double>(now - s.opened).count());
          }
          ++ended_;
          close(s.fd);
          s.fd = -1;
          s.retry_at = now + 1s; // an attacker that comes back
          continue;
        }
        if (now - s.last_byte >= 1s) {
          const char byte = s.sent < head.size() ? head[s.sent] : 'x';
          if (send(s.fd, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) {
            ++s.sent;
          }
          s.last_byte = now;
        }
      }
    }
  }

  int port_;
  const char* source_;
  std::vector<Slot> slots_;
  std::atomic<bool> stop_{false};
  std::atomic<double> longest_s_{0};
  std::atomic<int> opened_{0};
  std::atomic<int> ended_{0};
  std::thread thread_;
};

} // namespace kcache::testing
