// The route table. Rows for one path sit together, in the order a 405's Allow
// header lists their methods; README.md's table must list the same rows
// (route_table_test.cpp).

#include <kcache/service/routes.h>

#include <array>

namespace kcache::service {

std::span<const Route> route_table() {
  using http::verb;
  using RH = RequestHandler;
  constexpr auto kRead = Role::kRead;
  constexpr auto kSubmit = Role::kSubmit;
  constexpr auto kWrite = Role::kWrite;
  constexpr auto kAdmin = Role::kAdmin;
  static const std::array kTable = {
      Route{verb::get, "/healthz", std::nullopt, "healthz", &RH::healthz},
      Route{verb::head, "/healthz", std::nullopt, "healthz", &RH::healthz},
      Route{verb::get, "/metrics", kRead, "metrics", &RH::metrics_text},
      Route{verb::get, "/v1/stats", kRead, "stats", &RH::stats},
      Route{verb::post, "/v1/stats/zero", kAdmin, "stats_zero", &RH::zero_stats},
      Route{verb::get, "/v1/stats/history", kRead, "stats_history", &RH::stats_history},
      Route{verb::get, "/v1/whoami", kRead, "whoami", &RH::whoami},
      Route{verb::get, "/v1/ac/{key}", kRead, "ac", &RH::action},
      Route{verb::head, "/v1/ac/{key}", kRead, "ac", &RH::action},
      Route{verb::put, "/v1/ac/{key}", kWrite, "ac", &RH::action},
      Route{verb::delete_, "/v1/ac/{key}", kAdmin, "ac", &RH::action},
      Route{verb::get, "/v1/cas/{sha256}", kRead, "cas", &RH::cas},
      Route{verb::head, "/v1/cas/{sha256}", kRead, "cas", &RH::cas},
      Route{verb::put, "/v1/cas/{sha256}", kWrite, "cas", &RH::cas},
      Route{verb::delete_, "/v1/cas/{sha256}", kAdmin, "cas", &RH::cas},
      Route{verb::get, "/v1/artifacts/{key}", kRead, "artifacts", &RH::artifact, &RH::wait_for_put},
      Route{verb::put, "/v1/artifacts/{key}", kWrite, "artifacts", &RH::artifact},
      // A POST only to carry the key list: a read, so read-only trainers prefetch.
      Route{verb::post, "/v1/batch/get", kRead, "batch_get", &RH::batch_get},
      Route{verb::get, "/v1/entries", kRead, "entries", &RH::entries},
      Route{verb::post, "/v1/admin/verify", kAdmin, "admin_verify", &RH::verify},
      Route{verb::post, "/v1/admin/gc", kAdmin, "admin_gc", &RH::gc},
      Route{verb::get, "/v1/entries/{key}", kRead, "entry", &RH::entry},
      Route{verb::get, "/v1/explain", kRead, "explain", &RH::explain_keys},
      Route{verb::get, "/v1/jobs", kRead, "jobs", &RH::list_jobs, &RH::wait_for_jobs},
      Route{verb::post, "/v1/jobs", kSubmit, "jobs", &RH::submit_job},
      Route{verb::get, "/v1/jobs/{id}", kRead, "job", &RH::show_job, &RH::wait_for_job},
      Route{verb::delete_, "/v1/jobs/{id}", kSubmit, "job", &RH::cancel_job},
      Route{verb::post, "/v1/leases/{key}", kWrite, "leases", &RH::lease},
      Route{verb::put, "/v1/leases/{key}", kWrite, "leases", &RH::lease},
      Route{verb::delete_, "/v1/leases/{key}", kWrite, "leases", &RH::lease},
      Route{verb::get, "/v1/nodes", kRead, "nodes", &RH::nodes},
      Route{verb::get, "/v1/runs", kRead, "runs", &RH::list_runs},
      Route{verb::get, "/v1/runs/{run}", kRead, "run", &RH::show_run},
      Route{verb::put, "/v1/runs/{run}", kWrite, "run", &RH::put_run},
      // The dashboard: its pages check the token themselves (ui_routes.cpp).
      Route{verb::get, "/ui/", std::nullopt, "ui", &RH::ui_file},
      Route{verb::get, "/ui/{file}", std::nullopt, "ui", &RH::ui_file},
  };
  return kTable;
}

std::optional<std::string_view> match_route(std::string_view pattern, std::string_view path) {
  const auto brace = pattern.find('{');
  if (brace == std::string_view::npos) {
    return path == pattern ? std::optional<std::string_view>("") : std::nullopt;
  }
  const std::string_view prefix = pattern.substr(0, brace);
  if (path.size() > prefix.size() && path.starts_with(prefix)) {
    return path.substr(prefix.size());
  }
  return std::nullopt;
}

} // namespace kcache::service
