#pragma once
// One series of a kcached's /metrics, read through the client (header-only:
// only the test binaries that link kcache::client include it).

#include <kcache/client/client.h>

#include <sstream>
#include <string>

namespace kcache::testing {

// The value of `series` (a name with its labels, as /metrics prints it): 0
// when the series is absent, -1 when /metrics could not be read.
inline double scrape_metric(client::Client& c, const std::string& series) {
  auto res = c.request(client::HttpMethod::kGet, "/metrics");
  if (!res) {
    return -1;
  }
  std::istringstream lines(res->body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(series + " ", 0) == 0) {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return 0;
}

} // namespace kcache::testing
