// kcache runs / kcache run ID: kcache.torch's compile reports (/v1/runs), a
// table of runs and one run's report per rank.

#include "cli.h"
#include "table.h"

#include <cstdio>
#include <iostream>

namespace kcache::cli {

namespace {

std::string seconds_text(double s) {
  char out[32];
  std::snprintf(out, sizeof out, "%.1fs", s);
  return out;
}

// One rank's report, readable: totals, then each list with its reasons.
void print_report(const std::string& rank, const json& r) {
  const json totals = r.value("totals", json::object());
  std::cout << "rank " << rank << " on " << r.value("host", "?") << " (pid " << r.value("pid", 0)
            << ", torch " << r.value("torch", "?") << ", triton " << r.value("triton", "-")
            << ")\n";
  std::cout << "  graphs compiled " << totals.value("graphs_compiled", 0) << ", compile "
            << seconds_text(totals.value("compile_seconds", 0.0)) << ", saved by hits "
            << seconds_text(totals.value("seconds_saved_by_hits", 0.0)) << "; hits "
            << totals.value("hits", 0) << ", misses " << totals.value("misses", 0)
            << ", recompiles " << totals.value("recompiles", 0) << ", graph breaks "
            << totals.value("graph_breaks", 0) << "\n";
  for (const auto& [title, field] : {std::pair{"misses", "misses"},
                                     {"recompiles", "recompiles"},
                                     {"graph breaks", "graph_breaks"}}) {
    const json items = r.value(field, json::array());
    if (!items.is_array() || items.empty()) {
      continue;
    }
    std::cout << "  " << title << ":\n";
    for (const json& item : items) {
      std::cout << "    - " << item.value("what", std::string()) << ": "
                << item.value("reason", std::string()) << "\n";
    }
  }
  if (const json roi = r.value("roi", json()); roi.is_object()) {
    std::cout << "  return: eager step " << roi.value("eager_step_s", 0.0) << "s, compiled step "
              << roi.value("compiled_step_s", 0.0) << "s, break-even at step "
              << roi.value("break_even_step", json()).dump() << "\n";
  } else {
    std::cout << "  return: not measured (mark steps with kcache.torch.report_step())\n";
  }
}

} // namespace

int cmd_runs(Cli& cli) {
  std::optional<std::size_t> limit;
  if (int rc = parse_count(cli, "limit", 50, limit); rc != kOk) {
    return rc;
  }
  auto text = cli.client->runs(cli.option("namespace"), *limit);
  if (!text) {
    return fail_call(text.error());
  }
  const json answer = parse_json_or_discarded(*text);
  if (cli.json_output) {
    std::cout << protocol::json_text(answer, 2) << "\n";
    return kOk;
  }
  Table t;
  t.column("RUN");
  t.column("RANKS", Table::Align::kRight);
  t.column("HOST");
  t.column("STARTED", Table::Align::kRight);
  t.column("COMPILE", Table::Align::kRight);
  t.column("HITS", Table::Align::kRight);
  t.column("MISSES", Table::Align::kRight);
  t.column("RECOMPILES", Table::Align::kRight);
  t.column("BREAKS", Table::Align::kRight);
  const std::int64_t now = unix_now_ms();
  const json runs = answer.value("runs", json::array());
  for (const json& r : runs) {
    t.row({r.value("namespace", "") + "/" + r.value("run", ""),
           std::to_string(r.value("ranks", json::array()).size()), r.value("host", ""),
           format_age(r.value("started_ms", std::int64_t{0}), now),
           seconds_text(r.value("compile_seconds", 0.0)), std::to_string(r.value("hits", 0)),
           std::to_string(r.value("misses", 0)), std::to_string(r.value("recompiles", 0)),
           std::to_string(r.value("graph_breaks", 0))});
  }
  std::cout << t.render();
  std::printf("%zu run%s\n", runs.size(), runs.size() == 1 ? "" : "s");
  return kOk;
}

int cmd_run(Cli& cli) {
  // NAMESPACE/RUN as `kcache runs` lists it, or RUN with --namespace.
  if (cli.args.size() != 1) {
    return usage_error("usage: kcache run NAMESPACE/RUN (or RUN --namespace NS) [--json]");
  }
  std::string ns = cli.option("namespace");
  std::string run = cli.args[0];
  if (const auto slash = run.find('/'); slash != std::string::npos) {
    ns = run.substr(0, slash);
    run = run.substr(slash + 1);
  }
  if (ns.empty()) {
    return usage_error("kcache run: name the namespace (NAMESPACE/RUN or --namespace NS)");
  }
  auto text = cli.client->run(ns, run);
  if (!text) {
    return fail_call(text.error());
  }
  const json answer = parse_json_or_discarded(*text);
  if (cli.json_output) {
    std::cout << protocol::json_text(answer, 2) << "\n";
    return kOk;
  }
  std::cout << "run " << ns << "/" << run << "\n";
  const json reports = answer.value("reports", json::object());
  for (const auto& [rank, report] : reports.items()) {
    print_report(rank, report);
  }
  return kOk;
}

} // namespace kcache::cli
