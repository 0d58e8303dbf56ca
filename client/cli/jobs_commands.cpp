// kcache jobs | jobs watch | job | cancel | submit: the compile jobs of a kcached.

#include "cli.h"
#include "table.h"

#include <kcache/protocol/admin.h>
#include <kcache/protocol/json_text.h>
#include <kcache/protocol/units.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <thread>

namespace kcache::cli {

using protocol::JobState;

namespace {

std::string cut(std::string s, std::size_t n) {
  if (s.size() > n) {
    std::size_t end = n - 3;
    while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) {
      --end; // not inside a UTF-8 character (logs and diagnostics are UTF-8)
    }
    s = s.substr(0, end) + "...";
  }
  return s;
}

std::string millis(std::int64_t ms) {
  char buf[32];
  if (ms < 10'000) {
    std::snprintf(buf, sizeof buf, "%lld ms", static_cast<long long>(ms));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms) / 1000.0);
  }
  return buf;
}

void print_jobs_table(const std::vector<protocol::JobView>& jobs) {
  Table t;
  t.column("JOB");
  t.column("STATE");
  t.column("BACKEND");
  t.column("ENTRY");
  t.column("TARGET");
  t.column("PRIO", Table::Align::kRight);
  t.column("SUBMITTED", Table::Align::kRight);
  t.column("COMPILE", Table::Align::kRight);
  t.column("SIZE", Table::Align::kRight);
  t.column("ASKED", Table::Align::kRight);
  t.column("ERROR / WAITING");
  const std::int64_t now = unix_now_ms();
  for (const protocol::JobView& j : jobs) {
    const bool finished = j.finished_ms > 0;
    std::string entry = cut(j.entry, 32);
    if (j.kind == protocol::JobKind::kAutotune) {
      entry += " (autotune " + std::to_string(j.progress_done) + "/" +
               std::to_string(j.progress_total) + ")";
    }
    t.row(
        {j.id, std::string(protocol::job_state_name(j.state)), j.backend, entry, j.target,
         std::to_string(j.priority), format_age(j.submitted_ms, now),
         finished ? millis(j.compile_ms) : "-",
         finished ? protocol::format_size(j.output_size) : "-", std::to_string(j.submissions),
         j.error_code != protocol::JobError::kNone
             ? cut(std::string(protocol::job_error_name(j.error_code)) + ": " + j.error_message, 72)
             : cut(j.waiting_for, 72)});
  }
  std::cout << t.render();
}

} // namespace

// Follows the jobs that are unfinished now or submitted later, until none is
// left: a progress bar on a terminal, a line per change otherwise. Each
// listing after the first is a long-poll (/v1/jobs?since=): kcached answers
// when a job changes, so a quiet queue costs one request per kLongPoll, and
// a busy one one per interval at most. A daemon that does not count changes
// is polled every interval.
int cmd_jobs_watch(Cli& cli) {
  constexpr std::chrono::milliseconds kLongPoll{20000};
  const std::chrono::milliseconds interval(
      std::max(50, std::atoi(cli.option("interval-ms", "500").c_str())));
  const std::int64_t since = unix_now_ms();
  std::set<std::string> tracked;
  std::string last_line;
  const bool tty = isatty(STDERR_FILENO) != 0;
  std::optional<std::uint64_t> changes; // the daemon's count at its last answer
  while (true) {
    const auto asked = std::chrono::steady_clock::now();
    auto list = cli.client->jobs({100000, std::nullopt, changes,
                                  changes ? kLongPoll : std::chrono::milliseconds(0),
                                  /*logs=*/false});
    if (!list) {
      return fail_call(list.error());
    }
    changes = list->changes;
    std::size_t done = 0, failed = 0, running = 0, queued = 0;
    // Autotune searches: their variant steps (compiled, benchmarked).
    std::size_t steps_done = 0, steps_total = 0;
    for (const protocol::JobView& j : list->jobs) {
      const bool active = !j.finished();
      if (active || j.submitted_ms >= since) {
        tracked.insert(j.id);
      }
      if (!tracked.contains(j.id)) {
        continue;
      }
      queued += j.state == JobState::kQueued;
      running += j.state == JobState::kRunning;
      done += !active;
      failed += j.state == JobState::kFailed || j.state == JobState::kCancelled;
      if (j.kind == protocol::JobKind::kAutotune) {
        steps_done += j.progress_done;
        steps_total += j.progress_total;
      }
    }
    const std::size_t total = tracked.size();
    if (cli.json_output) {
      const std::string line = protocol::json_text(json{{"done", done},
                                                        {"total", total},
                                                        {"running", running},
                                                        {"queued", queued},
                                                        {"failed", failed},
                                                        {"variant_steps_done", steps_done},
                                                        {"variant_steps_total", steps_total}});
      if (line != last_line) {
        std::cout << line << std::endl;
        last_line = line;
      }
    } else if (tty) {
      constexpr std::size_t kWidth = 30;
      // Autotune searches fill the bar by variant steps, other jobs by jobs.
      const std::size_t filled = steps_total > 0 ? steps_done * kWidth / steps_total
                                 : total == 0    ? kWidth
                                                 : done * kWidth / total;
      std::fprintf(stderr, "\rjobs [%s%s] %zu/%zu done, %zu running, %zu queued, %zu failed%s   ",
                   std::string(filled, '#').c_str(), std::string(kWidth - filled, '.').c_str(),
                   done, total, running, queued, failed,
                   steps_total == 0 ? ""
                                    : (", autotune " + std::to_string(steps_done) + "/" +
                                       std::to_string(steps_total) + " variant steps")
                                          .c_str());
    } else {
      char line[256];
      std::snprintf(line, sizeof line, "%zu/%zu done, %zu running, %zu queued, %zu failed%s", done,
                    total, running, queued, failed,
                    steps_total == 0 ? ""
                                     : (", autotune " + std::to_string(steps_done) + "/" +
                                        std::to_string(steps_total) + " variant steps")
                                           .c_str());
      if (line != last_line) {
        std::printf("%s\n", line);
        std::fflush(stdout);
        last_line = line;
      }
    }
    if (queued == 0 && running == 0) {
      if (tty && !cli.json_output) {
        std::fprintf(stderr, "\n");
      }
      return failed == 0 ? kOk : kFailed;
    }
    std::this_thread::sleep_until(asked + interval);
  }
}

namespace {

void print_job(const json& j) {
  for (const char* field : {"id", "state", "backend", "entry", "target", "output", "compile_key"}) {
    std::printf("%-12s %s\n", field, j.value(field, "").c_str());
  }
  std::printf("%-12s %d\n", "priority", j.value("priority", 0));
  std::printf("%-12s %u\n", "submissions", j.value("submissions", 1U));
  std::printf("%-12s %u\n", "attempts", j.value("attempts", 0U));
  if (j.contains("queue_position")) {
    std::printf("%-12s %zu\n", "queue pos", j.value("queue_position", std::size_t{0}));
  }
  if (j.value("finished_ms", 0LL) > 0) {
    std::printf("%-12s %s\n", "compile", millis(j.value("compile_ms", 0LL)).c_str());
    std::printf("%-12s %s\n", "size", protocol::format_size(j.value("output_size", 0ULL)).c_str());
  }
  for (const json& key : j.value("keys", json::array())) {
    std::printf("%-12s %s\n", "key", key.get<std::string>().c_str());
  }
  if (const std::string why = j.value("waiting_for", ""); !why.empty()) {
    std::printf("%-12s %s\n", "waiting", why.c_str()); // cluster mode: what it waits for
  }
  if (j.contains("error")) {
    std::printf("%-12s %s: %s\n", "error", j["error"].value("code", "").c_str(),
                j["error"].value("message", "").c_str());
  }
  if (const std::string log = j.value("log", ""); !log.empty()) {
    std::printf("\ncompiler log:\n%s\n", log.c_str());
  }
}

} // namespace

void print_tuning_table(const json& table) {
  if (!table.is_object() || !table.contains("rows")) {
    return;
  }
  Table t;
  t.column("VARIANT");
  t.column("STATUS");
  t.column("MEDIAN", Table::Align::kRight);
  t.column("VS BEST", Table::Align::kRight);
  t.column("ROUNDS", Table::Align::kRight);
  t.column("ERROR");
  const std::string winner = table["winner"].is_string() ? table["winner"].get<std::string>() : "";
  double best = 0;
  for (const json& row : table["rows"]) {
    if (row.value("id", "") == winner) {
      best = row.value("median_us", 0.0);
    }
  }
  // Timed variants first, fastest first; then the rest as they came. The
  // position breaks ties, so std::sort gives the stable order (libstdc++ 12's
  // stable_sort trips clang 19's deprecation warnings).
  struct Row {
    double order;
    std::size_t position;
    const json* row;
  };
  std::vector<Row> sorted;
  for (const json& row : table["rows"]) {
    const double us = row.value("median_us", 0.0);
    sorted.push_back({us > 0 ? us : std::numeric_limits<double>::infinity(), sorted.size(), &row});
  }
  std::sort(sorted.begin(), sorted.end(), [](const Row& a, const Row& b) {
    return a.order != b.order ? a.order < b.order : a.position < b.position;
  });
  for (const Row& sorted_row : sorted) {
    const json* row = sorted_row.row;
    const double us = row->value("median_us", 0.0);
    char time[32] = "-", ratio[32] = "-";
    if (us > 0) {
      std::snprintf(time, sizeof time, "%.1f us", us);
      if (best > 0) {
        std::snprintf(ratio, sizeof ratio, "%.2fx", us / best);
      }
    }
    const std::string id = row->value("id", "");
    t.row({id == winner ? id + " (winner)" : id, row->value("status", ""), time, ratio,
           std::to_string(row->value("rounds", 0)), cut(row->value("error", ""), 60)});
  }
  std::printf("\nautotune: %zu variants, winner %s, %zu benchmarked (%zu timed runs) in %.2f s\n",
              table["rows"].size(), winner.empty() ? "none" : winner.c_str(),
              table.value("benchmarked", std::size_t{0}), table.value("timed_runs", std::size_t{0}),
              table.value("bench_seconds", 0.0));
  std::cout << t.render();
}

int cmd_jobs(Cli& cli) {
  client::JobsQuery query;
  if (int rc = parse_count(cli, "limit", 50, query.limit); rc != kOk) {
    return rc;
  }
  if (const std::string state = cli.option("state"); !state.empty()) {
    auto parsed = protocol::parse_job_state(state);
    if (!parsed) {
      return usage_error(parsed.error());
    }
    query.state = *parsed;
  }
  auto list = cli.client->jobs(query);
  if (!list) {
    return fail_call(list.error());
  }
  if (cli.json_output) {
    std::cout << protocol::json_text(protocol::to_json(*list), 2) << "\n";
    return kOk;
  }
  print_jobs_table(list->jobs);
  const protocol::JobList::Counts& c = list->counts;
  std::printf("%zu running, %zu queued (capacity %zu), %zu finished kept; %zu workers\n", c.running,
              c.queued, c.queue_capacity, c.finished, c.workers);
  return kOk;
}

int cmd_job(Cli& cli) {
  if (cli.args.size() != 1) {
    return usage_error("job needs one JOB_ID");
  }
  const auto wait = std::chrono::seconds(std::atoll(cli.option("wait", "0").c_str()));
  auto job = cli.client->job(cli.args[0], wait);
  if (!job) {
    if (job.error().http_status == 404) {
      std::fprintf(stderr, "kcache: no job %s\n", cli.args[0].c_str());
      return kNotFound;
    }
    return fail(job.error());
  }
  const json doc = parse_json_or_discarded(job->json);
  if (cli.json_output) {
    std::cout << protocol::json_text(doc, 2) << "\n";
  } else {
    print_job(doc);
  }
  return job->state == client::JobState::kFailed ? kFailed : kOk;
}

int cmd_cancel(Cli& cli) {
  if (cli.args.size() != 1) {
    return usage_error("cancel needs one JOB_ID");
  }
  auto job = cli.client->cancel(cli.args[0]);
  if (!job) {
    return fail_call(job.error());
  }
  if (cli.json_output) {
    std::cout << protocol::json_text(parse_json_or_discarded(job->json), 2) << "\n";
  } else {
    std::printf("%s: %s\n", job->id.c_str(),
                job->state == JobState::kRunning
                    ? "cancelling"
                    : std::string(protocol::job_state_name(job->state)).c_str());
  }
  return kOk;
}

int cmd_submit(Cli& cli) {
  if (cli.args.size() != 1) {
    return usage_error("submit needs one SPEC.json");
  }
  std::string spec;
  if (int rc = read_spec(cli, cli.flags.count("pack-headers") != 0, spec); rc != kOk) {
    return rc;
  }
  // A kc1- key's manifest: the key is then in the manifest's namespace (issue 14).
  std::string manifest;
  if (const std::string path = cli.option("manifest"); !path.empty()) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      return usage_error("cannot read " + path);
    }
    manifest.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  auto submitted = cli.client->submit(cli.option("key"), spec,
                                      std::atoi(cli.option("priority", "0").c_str()), manifest);
  if (!submitted) {
    return fail(submitted.error());
  }
  json out{{"status", submitted->status}, {"message", submitted->message}};
  if (submitted->job) {
    out["job"] = parse_json_or_discarded(submitted->job->json);
  }
  protocol::add_publication(out, {submitted->published_under, submitted->client_key_refused});
  const auto wait = std::chrono::seconds(std::atoll(cli.option("wait", "0").c_str()));
  if (wait.count() > 0 && submitted->job && !submitted->job->finished()) {
    auto done = cli.client->job(submitted->job->id, wait);
    if (!done) {
      return fail(done.error());
    }
    out["job"] = parse_json_or_discarded(done->json);
  }
  if (cli.json_output) {
    std::cout << protocol::json_text(out, 2) << "\n";
  } else {
    std::printf("%s: %s\n", submitted->status.c_str(), submitted->message.c_str());
    if (!submitted->client_key_refused.empty()) {
      const std::string key = cli.option("key");
      std::printf("not published under %s: %s\n", key.empty() ? "the manifest's key" : key.c_str(),
                  submitted->client_key_refused.c_str());
    }
    if (out.contains("job")) {
      print_job(out["job"]);
    }
  }
  const std::string state = out.contains("job") ? out["job"].value("state", "") : "";
  return submitted->status == "busy" || state == "failed" ? kFailed : kOk;
}

} // namespace kcache::cli
