#pragma once
// HTTP/1.1 by hand for attacks and probes that the client library would not
// make: chosen source addresses (any 127/8 address is loopback, so attackers
// and a well-behaved client are different peers), a small receive buffer,
// partial requests, and reading one response with a timeout.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::testing {

// A TCP connection to 127.0.0.1:port from `source`; -1 on failure.
inline int connect_from(int port, const char* source = "127.0.0.1", int rcvbuf = 0) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    return -1;
  }
  if (rcvbuf > 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  }
  sockaddr_in local{};
  local.sin_family = AF_INET;
  inet_pton(AF_INET, source, &local.sin_addr);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

inline bool send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) {
      return false;
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Reads until a response head (and the body its Content-Length announces)
// arrived, the peer closed, or the timeout passed.
inline std::string read_response(int fd,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(3)) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[8192];
  while (std::chrono::steady_clock::now() < deadline) {
    const auto head_end = out.find("\r\n\r\n");
    if (head_end != std::string::npos) {
      std::size_t length = 0;
      if (const auto cl = out.find("Content-Length: "); cl != std::string::npos && cl < head_end) {
        length = std::stoul(out.substr(cl + 16));
      }
      if (out.size() >= head_end + 4 + length) {
        return out;
      }
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 20) <= 0) {
      continue;
    }
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      break;
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

// Reads until `size` bytes arrived, the peer closed, or the timeout passed.
inline std::string read_bytes(int fd, std::size_t size,
                              std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[65536];
  while (out.size() < size && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 20) <= 0) {
      continue;
    }
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      break;
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

// The status of a response read by read_response; 0 for none.
inline int status_of(const std::string& response) {
  return response.size() >= 12 && response.rfind("HTTP/1.1 ", 0) == 0
             ? std::stoi(response.substr(9, 3))
             : 0;
}

inline double percentile(std::vector<double> values, double p) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1,
                         static_cast<std::size_t>(p * static_cast<double>(values.size())))];
}

// The sum of every series of `name` in kcached's /metrics (asked with
// `token`, or none); 0 when it cannot be read.
inline double metric_sum(int port, const std::string& name, const std::string& token = {}) {
  const int fd = connect_from(port);
  if (fd < 0) {
    return 0;
  }
  send_all(fd, "GET /metrics HTTP/1.1\r\nHost: t\r\n" +
                   (token.empty() ? std::string() : "Authorization: Bearer " + token + "\r\n") +
                   "Connection: close\r\n\r\n");
  const std::string text = read_response(fd);
  close(fd);
  double sum = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name, 0) == 0 && (line[name.size()] == ' ' || line[name.size()] == '{')) {
      sum += std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  return sum;
}

} // namespace kcache::testing
