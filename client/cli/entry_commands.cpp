// kcache stats | ls | show | get | put | rm: a kcached's entries and counters.

#include "cli.h"
#include "file_output.h"
#include "table.h"

#include <kcache/client/client.h>
#include <kcache/protocol/admin.h>
#include <kcache/protocol/clock.h>
#include <kcache/protocol/json_text.h>
#include <kcache/protocol/units.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace kcache::cli {

namespace fs = std::filesystem;

namespace {

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

} // namespace

int cmd_stats(Cli& cli) {
  // --zero (admin on "*"): the counters restart from zero; shown as they are then.
  auto stats = cli.flags.count("zero") != 0 ? cli.client->zero_stats() : cli.client->stats();
  if (!stats) {
    return fail_call(stats.error());
  }
  if (cli.json_output) {
    std::cout << protocol::json_text(protocol::to_json(*stats), 2) << "\n";
    return kOk;
  }
  const auto known_size = [](const std::optional<std::uint64_t>& v) {
    return v ? protocol::format_size(*v) : std::string("unknown");
  };
  std::string ratio = "-"; // no lookups yet
  if (stats->hit_ratio) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%.1f%%", *stats->hit_ratio * 100);
    ratio = buf;
  }
  std::printf("kcached %s (git %s), up %.0f s\n", stats->version.c_str(),
              stats->git_revision.c_str(), stats->uptime_s);
  if (stats->zeroed_ms != 0) {
    std::printf("counters zeroed %lld s ago\n",
                static_cast<long long>((protocol::unix_now_ms() - stats->zeroed_ms) / 1000));
  }
  std::printf("hit ratio %s: %llu hits, %llu misses, %llu tier errors\n\n", ratio.c_str(),
              static_cast<unsigned long long>(stats->hits),
              static_cast<unsigned long long>(stats->misses),
              static_cast<unsigned long long>(stats->errors));
  Table t;
  t.column("TIER");
  for (const char* h : {"STORED", "CAPACITY", "ENTRIES", "HITS", "MISSES", "ERRORS", "CORRUPT",
                        "EVICTIONS", "PUTS", "READ", "WRITTEN"}) {
    t.column(h, Table::Align::kRight);
  }
  for (const protocol::TierStats& tier : stats->tiers) {
    t.row({tier.name, known_size(tier.bytes_stored), known_size(tier.capacity),
           tier.entries ? std::to_string(*tier.entries) : "unknown", std::to_string(tier.hits),
           std::to_string(tier.misses), std::to_string(tier.errors), std::to_string(tier.corrupt),
           std::to_string(tier.evictions), std::to_string(tier.puts),
           protocol::format_size(tier.bytes_read), protocol::format_size(tier.bytes_written)});
  }
  std::cout << t.render();
  return kOk;
}

int cmd_ls(Cli& cli) {
  client::ListQuery query;
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
    std::cout << protocol::json_text(protocol::to_json(*list), 2) << "\n";
    return kOk;
  }
  Table t;
  t.column("AREA");
  t.column("KEY");
  // SIZE: what a hit hands out (an action's outputs together); STORED: the
  // bytes it takes here, framed and compressed (a CAS blob has only those).
  t.column("SIZE", Table::Align::kRight);
  t.column("STORED", Table::Align::kRight);
  t.column("HITS", Table::Align::kRight);
  t.column("LAST ACCESS", Table::Align::kRight);
  t.column("CREATED", Table::Align::kRight);
  const std::int64_t now = unix_now_ms();
  for (const client::EntrySummary& e : list->entries) {
    t.row({e.area, e.key, e.artifact_size ? protocol::format_size(*e.artifact_size) : "-",
           protocol::format_size(e.size), std::to_string(e.hits), format_age(e.last_access_ms, now),
           format_age(e.created_ms, now)});
  }
  std::cout << t.render() << list->entries.size() << " of "
            << (list->total_estimated ? "about " : "") << list->total << " entries\n";
  return kOk;
}

int cmd_show(Cli& cli) {
  if (cli.args.size() != 1) {
    return usage_error("show needs one KEY");
  }
  auto entry = cli.client->entry(cli.args[0]);
  if (!entry) {
    return fail_call(entry.error());
  }
  auto doc = protocol::to_json(*entry);
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
    std::cout << protocol::json_text(*doc, 2) << "\n";
    return kOk;
  }
  const std::int64_t now = unix_now_ms();
  std::printf("key       %s\nproducer  %s\ncreated   %s\n", entry->key.c_str(),
              entry->producer.c_str(), format_age(entry->created_ms, now).c_str());
  print_origin(origin);
  if (entry->storage) {
    const client::EntrySummary& s = *entry->storage;
    std::printf("stored    %s (record), %llu hits, last access %s\n",
                protocol::format_size(s.size).c_str(), static_cast<unsigned long long>(s.hits),
                format_age(s.last_access_ms, now).c_str());
    if (s.artifact_size) {
      std::printf("size      %s in %zu outputs\n", protocol::format_size(*s.artifact_size).c_str(),
                  entry->outputs.size());
    }
  }
  Table outputs;
  outputs.column("OUTPUT");
  outputs.column("SIZE", Table::Align::kRight);
  outputs.column("SHA256");
  for (const protocol::EntryOutput& o : entry->outputs) {
    outputs.row({o.name, protocol::format_size(o.size), o.digest});
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
                 protocol::format_size(artifact.files[0].data.size()).c_str());
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
                 protocol::format_size(f.data.size()).c_str());
  }
  return kOk;
}

int cmd_put(Cli& cli) {
  if (cli.args.size() < 2) {
    return usage_error("put needs KEY and at least one FILE");
  }
  std::vector<client::File> files;
  for (std::size_t i = 1; i < cli.args.size(); ++i) {
    std::ifstream in(cli.args[i], std::ios::binary);
    if (!in) {
      return usage_error("cannot read " + cli.args[i]);
    }
    std::stringstream ss;
    ss << in.rdbuf();
    files.push_back({fs::path(cli.args[i]).filename().string(), ss.str()});
  }
  client::PutOptions options;
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
    std::cout << protocol::json_text(json{{"key", cli.args[0]}, {"files", files.size()}}) << "\n";
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
    std::cout << protocol::json_text(json{{"deleted", key}}) << "\n";
  } else {
    std::printf("deleted %s\n", key.c_str());
  }
  return kOk;
}

// Inductor's hash details ("[hash] field: value" lines), kept by kcache.torch
} // namespace kcache::cli
