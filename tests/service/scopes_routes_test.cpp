// Issue 14: every route of kcached's table, asked without a token and with an
// unknown one while tokens are configured, answers 401 (the open ones, the
// liveness probes, 200). Iterates service::route_table(), so a new route is
// covered as soon as it is declared.

#include "kcached_process.h"
#include "strong_token.h"

#include <kcache/cachekey/sha256.h>
#include <kcache/service/routes.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace kcache {
namespace {

using testing::strong_token;

std::string token_config(const testing::TempDir& dir) {
  const std::string path = (dir.path() / "kcached.toml").string();
  std::ofstream(path) << "[[tokens]]\nname = \"admin\"\nsha256 = \""
                      << cachekey::to_hex(cachekey::Sha256::of(strong_token("admin")))
                      << "\"\nrole = \"admin\"\n";
  return path;
}

// Every route of the table, without a token and with an unknown one: 401.
TEST(ScopesRoutes, EveryRouteWantsAToken) {
  testing::TempDir dir;
  testing::KcachedProcess kcached({"--config", token_config(dir), "--workers", "0"});
  int checked = 0;
  for (const service::Route& route : service::route_table()) {
    std::string path(route.pattern);
    if (const auto brace = path.find('{'); brace != std::string::npos) {
      // A dashboard page: its route is open (its scripts are), the page is not.
      path = path.substr(0, brace) + (route.label == "ui" ? "index.html" : "torch:team-a:x");
    }
    const std::string method(service::http::to_string(route.method));
    for (const std::string& auth :
         {std::string(), "Authorization: Bearer " + strong_token("nobody") + "\r\n"}) {
      const std::string answer = testing::raw_exchange(
          kcached.port(), method + " " + path + " HTTP/1.1\r\nHost: t\r\n" + auth +
                              "Content-Length: 0\r\nConnection: close\r\n\r\n");
      const std::string expected =
          route.role || route.label == "ui" ? "HTTP/1.1 401" : "HTTP/1.1 200";
      EXPECT_EQ(answer.substr(0, expected.size()), expected) << method << " " << path << "\n"
                                                             << answer;
    }
    ++checked;
  }
  EXPECT_GE(checked, 20);
}

} // namespace
} // namespace kcache
