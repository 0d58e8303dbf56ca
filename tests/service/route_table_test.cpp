// README.md's route table and route_table() list the same routes: a route
// added, removed or changed on one side only fails here.

#include <kcache/service/routes.h>

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

namespace kcache::service {
namespace {

// method, path pattern, role ("none" when open), long-polls
using Row = std::tuple<std::string, std::string, std::string, bool>;

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" `");
  const auto last = s.find_last_not_of(" `");
  return first == std::string_view::npos ? "" : std::string(s.substr(first, last - first + 1));
}

std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line.substr(1)); // past the leading '|'
  for (std::string cell; std::getline(in, cell, '|');) {
    out.push_back(trim(cell));
  }
  return out;
}

std::vector<std::string> split_methods(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string method; std::getline(in, method, ',');) {
    out.push_back(trim(method));
  }
  return out;
}

// The table under the header "| method | path | role | long-poll | what |".
// A row may name several methods ("GET, HEAD") that share path, role and
// long-poll.
std::multiset<Row> readme_rows(std::vector<std::string>& problems) {
  const std::string path = std::string(KCACHE_SOURCE_DIR) + "/README.md";
  std::ifstream readme(path);
  EXPECT_TRUE(readme.good()) << "cannot read " << path;
  std::multiset<Row> rows;
  bool in_table = false;
  for (std::string line; std::getline(readme, line);) {
    if (!in_table) {
      in_table = line.starts_with("| method | path | role | long-poll |");
      continue;
    }
    if (!line.starts_with("|")) {
      break;
    }
    if (line.starts_with("|---")) {
      continue;
    }
    const std::vector<std::string> c = cells(line);
    if (c.size() < 4 || (c[3] != "yes" && !c[3].empty())) {
      problems.push_back("malformed row: " + line);
      continue;
    }
    for (const std::string& method : split_methods(c[0])) {
      rows.emplace(method, c[1], c[2], c[3] == "yes");
    }
  }
  EXPECT_TRUE(in_table) << "no route table in README.md";
  return rows;
}

std::multiset<Row> table_rows() {
  std::multiset<Row> rows;
  for (const Route& route : route_table()) {
    rows.emplace(std::string(http::to_string(route.method)), std::string(route.pattern),
                 route.role ? std::string(role_name(*route.role)) : "none", route.long_poll());
  }
  return rows;
}

std::string show(const Row& row) {
  const auto& [method, path, role, long_poll] = row;
  return method + " " + path + " (" + role + (long_poll ? ", long-poll" : "") + ")";
}

TEST(RouteTable, ReadmeListsEveryRouteAndNoOther) {
  std::vector<std::string> problems;
  const std::multiset<Row> readme = readme_rows(problems);
  const std::multiset<Row> table = table_rows();
  for (const Row& row : table) {
    if (readme.count(row) != 1) {
      problems.push_back("README.md lists " + std::to_string(readme.count(row)) +
                         " times: " + show(row));
    }
  }
  for (const Row& row : readme) {
    if (table.count(row) == 0) {
      problems.push_back("README.md lists a route the table lacks: " + show(row));
    }
  }
  for (const std::string& p : problems) {
    ADD_FAILURE() << p;
  }
  EXPECT_EQ(readme.size(), table.size());
}

TEST(RouteTable, EachMethodAndPathIsDeclaredOnce) {
  std::set<std::pair<http::verb, std::string_view>> seen;
  for (const Route& route : route_table()) {
    EXPECT_TRUE(seen.emplace(route.method, route.pattern).second)
        << http::to_string(route.method) << " " << route.pattern;
    EXPECT_FALSE(route.label.empty()) << route.pattern;
  }
}

TEST(RouteTable, PatternsMatchThemselvesOrAParamAfterTheirPrefix) {
  EXPECT_EQ(match_route("/v1/stats", "/v1/stats"), "");
  EXPECT_FALSE(match_route("/v1/stats", "/v1/stats/x"));
  EXPECT_EQ(match_route("/v1/ac/{key}", "/v1/ac/k1"), "k1");
  EXPECT_EQ(match_route("/v1/ac/{key}", "/v1/ac/a/b"), "a/b"); // the rest of the path
  EXPECT_FALSE(match_route("/v1/ac/{key}", "/v1/ac/"));        // the param is not empty
  EXPECT_FALSE(match_route("/v1/ac/{key}", "/v1/acx"));
}

} // namespace
} // namespace kcache::service
