// kcache: inspect and manage a kcached from the command line.
// `kcache --help` lists the commands; exit codes are documented there.

#include "cli.h"
#include "file_output.h"
#include "table.h"

#include <kcache/cachekey/explain.h>
#include <kcache/cachekey/hash_details.h>
#include <kcache/cachekey/key_manifest.h>
#include <kcache/client/client.h>
#include <kcache/protocol/admin.h>
#include <kcache/protocol/json_text.h>
#include <kcache/protocol/units.h>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

namespace {

namespace fs = std::filesystem;
using namespace kcache::cli;
using kcache::client::Client;

constexpr const char* kUsageText = R"(kcache: inspect and manage a kcache daemon

usage: kcache [--url URL] [--token TOKEN] [--timeout-ms N] [--json] COMMAND [ARGS]

commands:
  stats                         hits, misses and errors per storage tier
  ls [--area ac|cas] [--prefix P] [--sort size|last-access|hits|created|key] [--limit N]
                                list entries (default: action cache, most recent first)
  show KEY                      an entry's record (writer, producer, signing key and
                                whether its signature verifies), storage metadata and
                                key manifest
  get KEY [-o PATH]             fetch an artifact: its single file to PATH (or stdout),
                                several files into the directory PATH
  put KEY FILE... [--producer NAME] [--meta K=V]...
                                store files as the artifact for KEY
  rm KEY [--cas]                delete an action record (or a CAS blob); admin role
  explain KEY_A KEY_B           which key component differs, from the stored manifests
                                (or Inductor's hash details, for kcache.torch entries)
  verify [--repair]             re-hash every blob, check every record's blobs
  gc --max-size SIZE            drop least recently used entries down to SIZE (e.g. 5GiB)

compile jobs:
  jobs [--state S] [--limit N]  recent jobs, newest first (S: queued, running, succeeded,
                                failed, cancelled), with the queue's counts
  jobs watch [--interval-ms N]  follow unfinished and new jobs until none is left (progress)
  job ID [--wait SECONDS]       one job: state, timings, keys, error and compiler log
  cancel ID                     cancel a queued or running job (submit role)
  submit SPEC.json [--key K] [--manifest FILE] [--priority N] [--wait SECONDS]
         [--pack-headers [-I DIR]...]
                                submit a compile spec (JSON, see compiler/compile_spec.h);
                                --pack-headers packs the headers it includes from this
                                machine first (as pack-headers does); --manifest: the kc1-
                                key's manifest (JSON; it names the key when --key is not
                                given), whose namespace the key is then in
  nodes                         the cluster's live nodes (kcached --cluster): address,
                                version, compilers, workers, queue, last heartbeat
  runs [--namespace NS] [--limit N]
                                kcache.torch's compile reports, newest run first: ranks,
                                host, compile seconds, hits, misses, recompiles, breaks
  run NS/RUN                    one run's report per rank: misses (with explain),
                                recompiles and graph breaks with their reasons, ROI
  token new                     print a fresh 256-bit token (base64url) and the
                                sha256 = "..." line of kcached's [[tokens]] for it
  pack-headers SPEC.json [-I DIR]... [-o OUT]
                                print the spec (or write OUT) with the headers it includes
                                from the spec's -I dirs, then the DIRs, packed into
                                "headers" (kcached refuses -I DIR and host-path includes)

The server comes from --url, else $KCACHE_URL, else http://127.0.0.1:7070
(unix:///path for a Unix socket); the token from --token or $KCACHE_TOKEN.
For https:// URLs: --ca-file PEM (else $KCACHE_CA_FILE, else the system CAs)
verifies kcached's certificate; --client-cert PEM --client-key PEM (else
$KCACHE_CLIENT_CERT, $KCACHE_CLIENT_KEY) present one for mTLS.
--trusted-keys PEM[:PEM...] (files or directories of public keys, else
$KCACHE_TRUSTED_KEYS): `show` checks the record's signature against them and
`get` returns only artifacts signed by one of them whose bytes match the record.

exit codes:
  0 success   1 not found   2 usage error   3 daemon unreachable or timed out
  4 request refused or failed (or a job failed)   5 verify found problems
)";

int cmd_stats(Cli& cli) {
  auto stats = cli.client->stats();
  if (!stats) {
    return fail_call(stats.error());
  }
  if (cli.json_output) {
    std::cout << kcache::protocol::json_text(kcache::protocol::to_json(*stats), 2) << "\n";
    return kOk;
  }
  std::printf("uptime %.0f s; lookups: %llu hits, %llu misses, %llu tier errors\n\n",
              stats->uptime_s, static_cast<unsigned long long>(stats->hits),
              static_cast<unsigned long long>(stats->misses),
              static_cast<unsigned long long>(stats->errors));
  Table t;
  t.column("TIER");
  for (const char* h :
       {"HITS", "MISSES", "ERRORS", "CORRUPT", "EVICTIONS", "PUTS", "READ", "WRITTEN"}) {
    t.column(h, Table::Align::kRight);
  }
  for (const kcache::protocol::TierStats& tier : stats->tiers) {
    t.row({tier.name, std::to_string(tier.hits), std::to_string(tier.misses),
           std::to_string(tier.errors), std::to_string(tier.corrupt),
           std::to_string(tier.evictions), std::to_string(tier.puts),
           kcache::protocol::format_size(tier.bytes_read),
           kcache::protocol::format_size(tier.bytes_written)});
  }
  std::cout << t.render();
  return kOk;
}

int cmd_ls(Cli& cli) {
  kcache::client::ListQuery query;
  query.area = cli.option("area", "ac");
  query.prefix = cli.option("prefix");
  query.sort = cli.option("sort", "last-access");
  std::replace(query.sort.begin(), query.sort.end(), '-', '_');
  if (int rc = parse_count(cli, "limit", 50, query.limit); rc != kOk) {
    return rc;
  }
  auto list = cli.client->list(query);
  if (!list) {
    return fail_call(list.error());
  }
  if (cli.json_output) {
    std::cout << kcache::protocol::json_text(kcache::protocol::to_json(*list), 2) << "\n";
    return kOk;
  }
  Table t;
  t.column("AREA");
  t.column("KEY");
  t.column("SIZE", Table::Align::kRight);
  t.column("HITS", Table::Align::kRight);
  t.column("LAST ACCESS", Table::Align::kRight);
  t.column("CREATED", Table::Align::kRight);
  const std::int64_t now = unix_now_ms();
  for (const kcache::client::EntrySummary& e : list->entries) {
    t.row({e.area, e.key, kcache::protocol::format_size(e.size), std::to_string(e.hits),
           kcache::cli::format_age(e.last_access_ms, now),
           kcache::cli::format_age(e.created_ms, now)});
  }
  std::cout << t.render() << list->entries.size() << " of " << list->total << " entries\n";
  return kOk;
}

void print_manifest(const json& m) {
  std::cout << "\nkey manifest (schema " << m.value("schema_version", 0) << ")\n"
            << "  namespace  " << m.value("namespace", "") << "\n"
            << "  graph      " << m.value("graph_digest", "") << " ("
            << m.value("graph_nodes", json::array()).size() << " nodes)\n"
            << "  hardware   " << m.value("hardware_class", "") << "\n";
  for (const auto& [k, v] : m.value("toolchain", json::object()).items()) {
    std::cout << "  toolchain  " << k << " " << v.get<std::string>() << "\n";
  }
  for (const json& g : m.value("guards", json::array())) {
    std::cout << "  guard      " << g.get<std::string>() << "\n";
  }
  std::string options;
  for (const json& o : m.value("options", json::array())) {
    options += (options.empty() ? "" : " ") + o.get<std::string>();
  }
  std::cout << "  options    " << options << "\n";
}

int cmd_show(Cli& cli) {
  if (cli.args.size() != 1) {
    return usage_error("show needs one KEY");
  }
  auto entry = cli.client->entry(cli.args[0]);
  if (!entry) {
    return fail_call(entry.error());
  }
  auto doc = kcache::protocol::to_json(*entry);
  if (!doc) {
    std::fprintf(stderr, "kcache: %s\n", doc.error().c_str());
    return kFailed;
  }
  // Who wrote it and whose key signed it, from the record as stored.
  auto record = cli.client->record(cli.args[0]);
  const json origin = record
                          ? record_origin(cli, cli.args[0], *record)
                          : json{{"verification", "unknown"}, {"detail", record.error().message}};
  if (cli.json_output) {
    (*doc)["origin"] = origin;
    std::cout << kcache::protocol::json_text(*doc, 2) << "\n";
    return kOk;
  }
  const std::int64_t now = unix_now_ms();
  std::printf("key       %s\nproducer  %s\ncreated   %s\n", entry->key.c_str(),
              entry->producer.c_str(), kcache::cli::format_age(entry->created_ms, now).c_str());
  print_origin(origin);
  if (entry->storage) {
    const kcache::client::EntrySummary& s = *entry->storage;
    std::printf("record    %s, %llu hits, last access %s\n",
                kcache::protocol::format_size(s.size).c_str(),
                static_cast<unsigned long long>(s.hits),
                kcache::cli::format_age(s.last_access_ms, now).c_str());
  }
  Table outputs;
  outputs.column("OUTPUT");
  outputs.column("SIZE", Table::Align::kRight);
  outputs.column("SHA256");
  for (const kcache::protocol::EntryOutput& o : entry->outputs) {
    outputs.row({o.name, kcache::protocol::format_size(o.size), o.digest});
  }
  std::cout << "\n" << outputs.render();
  if (!entry->metadata.empty()) {
    std::cout << "\nmetadata\n";
    for (const auto& [k, v] : entry->metadata) {
      if (k == "autotune_table") {
        continue; // printed as a table below
      }
      std::cout << "  " << k << " = " << v << "\n";
    }
    if (const auto table = entry->metadata.find("autotune_table"); table != entry->metadata.end()) {
      print_tuning_table(parse_json_or_discarded(table->second));
    }
  }
  if (!entry->manifest_json.empty()) {
    print_manifest(parse_json_or_discarded(entry->manifest_json));
  }
  return kOk;
}

int cmd_get(Cli& cli) {
  if (cli.args.size() != 1) {
    return usage_error("get needs one KEY");
  }
  auto got = cli.client->get(cli.args[0]);
  if (!got) {
    return fail(got.error());
  }
  if (!got->has_value()) {
    if (const auto v = cli.client->verification(); v.rejected_total() > 0) {
      std::fprintf(stderr, "kcache: refused %s\n", v.last_rejection.c_str());
      return kFailed;
    }
    std::fprintf(stderr, "kcache: no artifact for %s\n", cli.args[0].c_str());
    return kNotFound;
  }
  const auto& artifact = **got;
  const std::string out = cli.option("o");
  if (artifact.files.size() == 1 && !fs::is_directory(out)) {
    if (out.empty() || out == "-") {
      std::cout.write(artifact.files[0].data.data(),
                      static_cast<std::streamsize>(artifact.files[0].data.size()));
      return kOk;
    }
    if (auto written = write_file_atomically(out, artifact.files[0].data); !written) {
      std::fprintf(stderr, "kcache: %s\n", written.error().c_str());
      return kFailed;
    }
    std::fprintf(stderr, "wrote %s (%s)\n", out.c_str(),
                 kcache::protocol::format_size(artifact.files[0].data.size()).c_str());
    return kOk;
  }
  if (out.empty()) {
    return usage_error("this artifact has " + std::to_string(artifact.files.size()) +
                       " files: give -o DIRECTORY");
  }
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) {
    std::fprintf(stderr, "kcache: cannot create %s: %s\n", out.c_str(), ec.message().c_str());
    return kFailed;
  }
  for (const auto& f : artifact.files) {
    // A file name from the server is untrusted: its last component only, and
    // never one that names the directory itself or its parent.
    const fs::path name = fs::path(f.name).filename();
    if (name.empty() || name == "." || name == "..") {
      std::fprintf(stderr, "kcache: skipped a file named '%s'\n", f.name.c_str());
      continue;
    }
    const fs::path path = fs::path(out) / name;
    if (auto written = write_file_atomically(path.string(), f.data); !written) {
      std::fprintf(stderr, "kcache: %s\n", written.error().c_str());
      return kFailed;
    }
    std::fprintf(stderr, "wrote %s (%s)\n", path.c_str(),
                 kcache::protocol::format_size(f.data.size()).c_str());
  }
  return kOk;
}

int cmd_put(Cli& cli) {
  if (cli.args.size() < 2) {
    return usage_error("put needs KEY and at least one FILE");
  }
  std::vector<kcache::client::File> files;
  for (std::size_t i = 1; i < cli.args.size(); ++i) {
    std::ifstream in(cli.args[i], std::ios::binary);
    if (!in) {
      return usage_error("cannot read " + cli.args[i]);
    }
    std::stringstream ss;
    ss << in.rdbuf();
    files.push_back({fs::path(cli.args[i]).filename().string(), ss.str()});
  }
  kcache::client::PutOptions options;
  options.producer = cli.option("producer", "kcache-cli");
  for (auto [it, end] = cli.options.equal_range("meta"); it != end; ++it) {
    const auto eq = it->second.find('=');
    if (eq == std::string::npos) {
      return usage_error("--meta takes K=V");
    }
    options.metadata[it->second.substr(0, eq)] = it->second.substr(eq + 1);
  }
  if (auto ok = cli.client->put(cli.args[0], files, options); !ok) {
    return fail(ok.error());
  }
  if (cli.json_output) {
    std::cout << kcache::protocol::json_text(json{{"key", cli.args[0]}, {"files", files.size()}})
              << "\n";
  } else {
    std::printf("stored %zu file(s) as %s\n", files.size(), cli.args[0].c_str());
  }
  return kOk;
}

int cmd_rm(Cli& cli) {
  if (cli.args.size() != 1) {
    return usage_error("rm needs one KEY");
  }
  const std::string& key = cli.args[0];
  auto removed = cli.flags.count("cas") ? cli.client->remove_blob(key) : cli.client->remove(key);
  if (!removed) {
    return fail_call(removed.error());
  }
  if (cli.json_output) {
    std::cout << kcache::protocol::json_text(json{{"deleted", key}}) << "\n";
  } else {
    std::printf("deleted %s\n", key.c_str());
  }
  return kOk;
}

// Inductor's hash details ("[hash] field: value" lines), kept by kcache.torch
// in the entry's metadata; empty if the entry has none.
std::vector<std::string> stored_hash_details(const kcache::client::Entry& entry) {
  std::vector<std::string> lines;
  const auto details = entry.metadata.find("hash_details");
  if (details == entry.metadata.end()) {
    return lines;
  }
  const json parsed = parse_json_or_discarded(details->second);
  if (parsed.is_array()) {
    for (const json& line : parsed) {
      if (line.is_string()) {
        lines.push_back(line.get<std::string>());
      }
    }
  }
  return lines;
}

void print_explanation(const Cli& cli, const kcache::cachekey::Explanation& e) {
  if (cli.json_output) {
    json diffs = json::array();
    for (const auto& d : e.diffs) {
      diffs.push_back({{"component", d.component}, {"a", d.a}, {"b", d.b}, {"details", d.details}});
    }
    std::cout << kcache::protocol::json_text(
                     json{{"key_a", e.key_a}, {"key_b", e.key_b}, {"diffs", diffs}}, 2)
              << "\n";
  } else {
    std::cout << kcache::cachekey::to_text(e);
  }
}

int cmd_explain(Cli& cli) {
  if (cli.args.size() != 2) {
    return usage_error("explain needs KEY_A and KEY_B");
  }
  std::vector<kcache::client::Entry> entries;
  for (const std::string& key : cli.args) {
    auto entry = cli.client->entry(key);
    if (!entry) {
      return fail_call(entry.error());
    }
    entries.push_back(std::move(*entry));
  }
  if (!entries[0].manifest_json.empty() && !entries[1].manifest_json.empty()) {
    std::vector<kcache::cachekey::KeyManifest> manifests;
    for (std::size_t i = 0; i < 2; ++i) {
      auto manifest = kcache::cachekey::manifest_from_json(entries[i].manifest_json);
      if (!manifest) {
        std::fprintf(stderr, "kcache: %s: %s\n", cli.args[i].c_str(),
                     manifest.error().message.c_str());
        return kFailed;
      }
      manifests.push_back(std::move(*manifest));
    }
    print_explanation(cli, kcache::cachekey::explain(manifests[0], manifests[1]));
    return kOk;
  }
  // Entries of clients that hash their own keys (Inductor through kcache.torch).
  const auto details_a = stored_hash_details(entries[0]);
  const auto details_b = stored_hash_details(entries[1]);
  if (details_a.empty() || details_b.empty()) {
    const std::string& bare = details_a.empty() ? cli.args[0] : cli.args[1];
    std::fprintf(stderr,
                 "kcache: %s was stored without a key manifest or hash details; nothing to "
                 "compare\n",
                 bare.c_str());
    return kFailed;
  }
  print_explanation(cli, kcache::cachekey::explain_hash_details(
                             cli.args[0], kcache::cachekey::parse_hash_details(details_a),
                             cli.args[1], kcache::cachekey::parse_hash_details(details_b)));
  return kOk;
}

int cmd_verify(Cli& cli) {
  // Work in slices (16 CAS prefixes, then the action cache) to show progress.
  std::vector<kcache::client::VerifyQuery> slices;
  for (const char c : std::string("0123456789abcdef")) {
    slices.push_back({"cas", std::string(1, c), false});
  }
  slices.push_back({"ac", "", false});
  std::map<std::string, std::size_t> checked, repaired;
  json problems = json::array();
  for (std::size_t i = 0; i < slices.size(); ++i) {
    kcache::client::VerifyQuery& slice = slices[i];
    slice.repair = cli.flags.count("repair") != 0;
    auto report = cli.client->verify(slice);
    if (!report) {
      return fail_call(report.error());
    }
    checked[slice.area] += report->checked;
    repaired[slice.area] += report->repaired;
    for (const kcache::protocol::VerifyProblem& p : report->problems) {
      problems.push_back({{"key", p.key}, {"problem", p.problem}, {"area", slice.area}});
    }
    if (!cli.json_output) {
      progress("verifying", i + 1, slices.size());
    }
  }
  if (cli.json_output) {
    std::cout << kcache::protocol::json_text(
                     json{{"checked", checked}, {"repaired", repaired}, {"problems", problems}}, 2)
              << "\n";
  } else {
    Table t;
    t.column("AREA");
    t.column("CHECKED", Table::Align::kRight);
    t.column("REPAIRED", Table::Align::kRight);
    for (const char* area : {"cas", "ac"}) {
      t.row({area, std::to_string(checked[area]), std::to_string(repaired[area])});
    }
    std::cout << t.render();
    for (const json& p : problems) {
      std::printf("%s %s: %s\n", p.value("area", "").c_str(), p.value("key", "").c_str(),
                  p.value("problem", "").c_str());
    }
    std::printf("%zu problem(s)\n", problems.size());
  }
  return problems.empty() ? kOk : kProblems;
}

int cmd_gc(Cli& cli) {
  const std::string max = cli.option("max-size");
  if (max.empty()) {
    return usage_error("gc needs --max-size SIZE");
  }
  auto size = kcache::protocol::parse_size(max);
  if (!size) {
    return usage_error(size.error());
  }
  auto report = cli.client->gc({*size});
  if (!report) {
    return fail_call(report.error());
  }
  if (cli.json_output) {
    std::cout << kcache::protocol::json_text(kcache::protocol::to_json(*report), 2) << "\n";
  } else {
    std::printf("removed %llu entries (%s); %s -> %s\n",
                static_cast<unsigned long long>(report->removed_entries),
                kcache::protocol::format_size(report->removed_bytes).c_str(),
                kcache::protocol::format_size(report->before_bytes).c_str(),
                kcache::protocol::format_size(report->after_bytes).c_str());
  }
  return kOk;
}

} // namespace

int main(int argc, char** argv) {
  static const std::set<std::string> kValued = {
      "url",         "token",      "timeout-ms",   "area",        "prefix",   "sort",
      "limit",       "o",          "producer",     "meta",        "max-size", "state",
      "wait",        "key",        "priority",     "interval-ms", "I",        "ca-file",
      "client-cert", "client-key", "trusted-keys", "manifest",    "namespace"};
  Cli cli;
  kcache::client::ClientOptions options;
  if (const char* url = std::getenv("KCACHE_URL"); url != nullptr && *url != '\0') {
    options.url = url;
  }
  if (const char* token = std::getenv("KCACHE_TOKEN"); token != nullptr) {
    options.token = token;
  }
  for (auto [env, field] : {std::pair{"KCACHE_CA_FILE", &options.ca_file},
                            {"KCACHE_CLIENT_CERT", &options.client_cert_file},
                            {"KCACHE_CLIENT_KEY", &options.client_key_file}}) {
    if (const char* value = std::getenv(env); value != nullptr) {
      *field = value;
    }
  }
  std::string command;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsageText, stdout);
      return kOk;
    }
    if (a.starts_with("-I") && a.size() > 2) {
      cli.options.emplace("I", a.substr(2)); // -IDIR, as compilers take it
    } else if (a.starts_with("-") && a.size() > 1) {
      const std::string name = a.substr(a.find_first_not_of('-'));
      if (kValued.count(name)) {
        if (i + 1 >= argc) {
          return usage_error("--" + name + " needs a value");
        }
        cli.options.emplace(name, argv[++i]);
      } else if (name == "json") {
        cli.json_output = true;
      } else {
        cli.flags.insert(name);
      }
    } else if (command.empty()) {
      command = a;
    } else {
      cli.args.push_back(a);
    }
  }
  if (command.empty()) {
    std::fputs(kUsageText, stderr);
    return kUsage;
  }
  if (command == "token") { // no daemon involved
    return cmd_token(cli.args);
  }
  options.url = cli.option("url", options.url);
  options.token = cli.option("token", options.token);
  options.ca_file = cli.option("ca-file", options.ca_file);
  options.client_cert_file = cli.option("client-cert", options.client_cert_file);
  options.client_key_file = cli.option("client-key", options.client_key_file);
  // Trusted keys turn verification on: `get` then hands out only verified artifacts.
  const char* env_keys = std::getenv("KCACHE_TRUSTED_KEYS");
  const std::string trusted_keys = cli.option("trusted-keys", env_keys != nullptr ? env_keys : "");
  for (std::string_view rest = trusted_keys; !rest.empty();) {
    const auto colon = rest.find(':');
    if (colon != 0) {
      options.trusted_keys.emplace_back(rest.substr(0, colon));
    }
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
  }
  options.verify_signatures = !options.trusted_keys.empty();
  if (const std::string t = cli.option("timeout-ms"); !t.empty()) {
    options.timeout = std::chrono::milliseconds(std::atoi(t.c_str()));
  }
  auto client = Client::create(options);
  if (!client) {
    return fail(client.error());
  }
  cli.client = std::move(*client);

  static const std::map<std::string, int (*)(Cli&)> kCommands = {
      {"stats", cmd_stats},     {"ls", cmd_ls},
      {"show", cmd_show},       {"get", cmd_get},
      {"put", cmd_put},         {"rm", cmd_rm},
      {"explain", cmd_explain}, {"verify", cmd_verify},
      {"gc", cmd_gc},           {"jobs", cmd_jobs},
      {"job", cmd_job},         {"cancel", cmd_cancel},
      {"submit", cmd_submit},   {"pack-headers", cmd_pack_headers},
      {"nodes", cmd_nodes},     {"runs", cmd_runs},
      {"run", cmd_run}};
  const auto it = kCommands.find(command);
  if (it == kCommands.end()) {
    return usage_error("unknown command '" + command + "'");
  }
  try {
    return it->second(cli);
  } catch (const nlohmann::json::exception& e) {
    std::fprintf(stderr, "kcache: unexpected answer from kcached: %s\n", e.what());
    return kFailed;
  }
}
