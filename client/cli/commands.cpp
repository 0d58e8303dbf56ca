// Every kcache subcommand, its arguments and options: what `kcache --help`
// and `kcache COMMAND --help` list, and what the parser accepts.

#include "command_line.h"

#include <kcache/protocol/units.h>

namespace kcache::cli {

namespace {

// An option with one value per use, given at most once.
CLI::Option* value(CLI::App* app, const std::string& name, const std::string& description) {
  return app->add_option(name, description)->expected(1);
}

// An option that may be given several times (--meta K=V, -I DIR).
CLI::Option* repeated(CLI::App* app, const std::string& name, const std::string& description) {
  return value(app, name, description)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

CLI::Option* flag(CLI::App* app, const std::string& name, const std::string& description) {
  return app->add_flag(name)->description(description);
}

// A positional argument.
CLI::Option* argument(CLI::App* app, const std::string& name, const std::string& description) {
  return app->add_option(name, description)->expected(1)->required();
}

void add_entry_commands(CommandTable& t) {
  CLI::App& app = t.app();
  CLI::App* stats = t.add(app, "stats",
                          "hit ratio, hits, misses and errors, bytes stored and capacity per "
                          "storage tier, uptime and version",
                          cmd_stats);
  flag(stats, "--zero", "restart the counters from zero (admin on \"*\"; /metrics keeps counting)");

  CLI::App* ls =
      t.add(app, "ls", "list entries (default: action cache, most recent first)", cmd_ls);
  value(ls, "--area", "ac (action cache, default) or cas")->check(CLI::IsMember({"ac", "cas"}));
  value(ls, "--prefix", "only keys that start with P");
  value(ls, "--sort", "size (bytes stored), last-access (default), hits, created or key")
      ->check(CLI::IsMember({"size", "last-access", "last_access", "hits", "created", "key"}));
  value(ls, "--limit", "at most N entries (default 50)")->check(count_value());

  CLI::App* show = t.add(app, "show",
                         "an entry's record (writer, producer, signing key and whether its "
                         "signature verifies), storage metadata and key manifest",
                         cmd_show);
  argument(show, "KEY", "the action key");

  CLI::App* get = t.add(app, "get",
                        "fetch an artifact: its single file to PATH (or stdout), several files "
                        "into the directory PATH",
                        cmd_get);
  argument(get, "KEY", "the action key");
  value(get, "-o", "where to write it (- or none: stdout)");

  CLI::App* put = t.add(app, "put", "store files as the artifact for KEY", cmd_put);
  argument(put, "KEY", "the action key");
  argument(put, "FILE", "the artifact's files")
      ->expected(1, CLI::detail::expected_max_vector_size)
      ->allow_extra_args()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  value(put, "--producer", "who made it (default kcache-cli)");
  repeated(put, "--meta", "metadata K=V (repeatable)");

  CLI::App* rm = t.add(app, "rm", "delete an action record (or a CAS blob); admin role", cmd_rm);
  argument(rm, "KEY", "the action key (or CAS digest with --cas)");
  flag(rm, "--cas", "KEY is a CAS blob's digest");
}

void add_maintenance_commands(CommandTable& t) {
  CLI::App& app = t.app();
  CLI::App* explain = t.add(app, "explain",
                            "which key component differs, from the stored manifests (or "
                            "Inductor's hash details, for kcache.torch entries)",
                            cmd_explain);
  argument(explain, "KEY_A", "the first key");
  argument(explain, "KEY_B", "the second key");

  CLI::App* verify =
      t.add(app, "verify", "re-hash every blob, check every record's blobs", cmd_verify);
  flag(verify, "--repair", "remove what is corrupt or dangling");

  CLI::App* gc = t.add(app, "gc",
                       "drop entries nobody read for AGE (--older-than), then least recently "
                       "used ones down to SIZE (--max-size); one of the two at least",
                       cmd_gc);
  value(gc, "--max-size", "the size to trim down to (e.g. 5GiB)")->check(size_value());
  value(gc, "--older-than", "drop entries nobody read for this long (e.g. 7d, 12h, 30m)")
      ->check(CLI::Validator(
          [](std::string& text) {
            auto age = protocol::parse_duration_s(text);
            return age ? std::string() : age.error();
          },
          "AGE"));
}

void add_job_commands(CommandTable& t) {
  CLI::App& app = t.app();
  CLI::App* jobs =
      t.add(app, "jobs", "recent compile jobs, newest first, with the queue's counts", cmd_jobs);
  value(jobs, "--state", "only jobs in state S: queued, running, succeeded, failed, cancelled");
  value(jobs, "--limit", "at most N jobs (default 50)")->check(count_value());
  CLI::App* watch =
      t.add(*jobs, "watch", "follow unfinished and new jobs until none is left (progress)",
            cmd_jobs_watch);
  value(watch, "--interval-ms",
        "redraw at most every N ms (default 500); kcached answers when a job changes")
      ->check(count_value());

  CLI::App* job =
      t.add(app, "job", "one job: state, timings, keys, error and compiler log", cmd_job);
  argument(job, "ID", "the job's id");
  value(job, "--wait", "wait up to SECONDS for it to finish")->check(count_value());

  CLI::App* cancel =
      t.add(app, "cancel", "cancel a queued or running job (submit role)", cmd_cancel);
  argument(cancel, "ID", "the job's id");

  CLI::App* submit = t.add(app, "submit",
                           "submit a compile spec (JSON, see compiler/compile_spec.h); "
                           "--pack-headers packs the headers it includes from this machine first",
                           cmd_submit);
  argument(submit, "SPEC", "the compile spec (JSON file)");
  value(submit, "--key", "publish the result under this key too");
  value(submit, "--manifest",
        "the kc1- key's manifest (JSON file); it names the key when --key is not given");
  value(submit, "--priority", "queue priority (higher runs first)")->check(integer_value());
  value(submit, "--wait", "wait up to SECONDS for the job")->check(count_value());
  flag(submit, "--pack-headers", "pack the headers the spec includes from this machine");
  repeated(submit, "-I", "an include directory for --pack-headers (repeatable)");

  CLI::App* pack = t.add(app, "pack-headers",
                         "print the spec (or write OUT) with the headers it includes from the "
                         "spec's -I dirs, then the DIRs, packed into \"headers\"",
                         cmd_pack_headers);
  argument(pack, "SPEC", "the compile spec (JSON file)");
  repeated(pack, "-I", "an include directory (repeatable)");
  value(pack, "-o", "write to OUT instead of stdout");
}

void add_cluster_commands(CommandTable& t) {
  CLI::App& app = t.app();
  t.add(app, "nodes",
        "the cluster's live nodes (kcached --cluster): address, version, compilers, workers, "
        "queue, last heartbeat",
        cmd_nodes);

  CLI::App* runs = t.add(app, "runs",
                         "kcache.torch's compile reports, newest run first: ranks, host, compile "
                         "seconds, hits, misses, recompiles, breaks",
                         cmd_runs);
  value(runs, "--namespace", "only runs of namespace NS");
  value(runs, "--limit", "at most N runs (default 50)")->check(count_value());

  CLI::App* run = t.add(app, "run",
                        "one run's report per rank: misses (with explain), recompiles and graph "
                        "breaks with their reasons, ROI",
                        cmd_run);
  argument(run, "RUN", "NAMESPACE/RUN as `kcache runs` lists it (or RUN with --namespace)");
  value(run, "--namespace", "the run's namespace");

  CLI::App* token = t.add(app, "token", "bearer tokens for kcached's config", nullptr, false);
  token->require_subcommand(1);
  t.add(*token, "new",
        "print a fresh 256-bit token (base64url) and the sha256 = \"...\" line of kcached's "
        "[[tokens]] for it",
        cmd_token_new, false);
}

} // namespace

void add_commands(CommandTable& table) {
  add_entry_commands(table);
  add_maintenance_commands(table);
  add_job_commands(table);
  add_cluster_commands(table);
}

} // namespace kcache::cli
