#pragma once
// kcached's HTTP routes, each declared once: method, path pattern, the role it
// needs, whether it long-polls, its metrics label and its handler. Dispatch,
// the role checks, 405s and their Allow headers, the metrics route labels and
// README.md's route table (checked by tests/service/route_table_test.cpp) all
// come from this one table.

#include <kcache/service/config.h>
#include <kcache/service/request_handler.h>
#include <kcache/service/tokens.h>

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace kcache::service {

// A request's query parameters, percent-decoded.
struct Query {
  std::map<std::string, std::string, std::less<>> params;
  std::string get(std::string_view name, const std::string& fallback = "") const {
    const auto it = params.find(name);
    return it == params.end() ? fallback : it->second;
  }
};

// What a handler gets besides the request: the path's `{param}`, the query,
// and who asks. The table's role is the least a token needs in *some*
// namespace; handlers check the role in the namespace of what they touch.
struct RouteArgs {
  std::string_view param; // empty for a pattern without one
  const Query& query;
  std::string_view label; // the route's metrics label
  const Principal& who;   // the token's identity and roles (tokens.h)
};

struct Route {
  using Handler = Response (RequestHandler::*)(const Request&, const RouteArgs&);
  // Answers later, through the responder, when the request asks to wait.
  using Waiter = void (RequestHandler::*)(const Request&, const RouteArgs&,
                                          std::chrono::milliseconds wait, const Responder&);

  http::verb method;
  // "/v1/stats" matches itself; "/v1/ac/{key}" matches "/v1/ac/" and a
  // non-empty rest of the path, which the handler gets as its param.
  std::string_view pattern;
  std::optional<Role> role; // none: served without a token (liveness probes)
  std::string_view label;
  Handler handler;
  // Set on the routes that long-poll (GET ...?wait_ms=N).
  Waiter waiter = nullptr;

  bool long_poll() const { return waiter != nullptr; }
};

// Every route, in the order 405s list a path's methods.
std::span<const Route> route_table();

// The param `pattern` captures from `path`, or nullopt when it does not match.
std::optional<std::string_view> match_route(std::string_view pattern, std::string_view path);

} // namespace kcache::service
