// kcache explain | verify | gc: comparing keys, checking and trimming a store.

#include "cli.h"
#include "table.h"

#include <kcache/cachekey/explain.h>
#include <kcache/cachekey/hash_details.h>
#include <kcache/cachekey/key_manifest.h>
#include <kcache/client/client.h>
#include <kcache/protocol/admin.h>
#include <kcache/protocol/json_text.h>
#include <kcache/protocol/units.h>

#include <cstdio>
#include <iostream>
#include <map>

namespace kcache::cli {

namespace {

// in the entry's metadata; empty if the entry has none.
std::vector<std::string> stored_hash_details(const client::Entry& entry) {
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

void print_explanation(const Cli& cli, const cachekey::Explanation& e) {
  if (cli.json_output) {
    json diffs = json::array();
    for (const auto& d : e.diffs) {
      diffs.push_back({{"component", d.component}, {"a", d.a}, {"b", d.b}, {"details", d.details}});
    }
    std::cout << protocol::json_text(json{{"key_a", e.key_a}, {"key_b", e.key_b}, {"diffs", diffs}},
                                     2)
              << "\n";
  } else {
    std::cout << cachekey::to_text(e);
  }
}

} // namespace

int cmd_explain(Cli& cli) {
  if (cli.args.size() != 2) {
    return usage_error("explain needs KEY_A and KEY_B");
  }
  std::vector<client::Entry> entries;
  for (const std::string& key : cli.args) {
    auto entry = cli.client->entry(key);
    if (!entry) {
      return fail_call(entry.error());
    }
    entries.push_back(std::move(*entry));
  }
  if (!entries[0].manifest_json.empty() && !entries[1].manifest_json.empty()) {
    std::vector<cachekey::KeyManifest> manifests;
    for (std::size_t i = 0; i < 2; ++i) {
      auto manifest = cachekey::manifest_from_json(entries[i].manifest_json);
      if (!manifest) {
        std::fprintf(stderr, "kcache: %s: %s\n", cli.args[i].c_str(),
                     manifest.error().message.c_str());
        return kFailed;
      }
      manifests.push_back(std::move(*manifest));
    }
    print_explanation(cli, cachekey::explain(manifests[0], manifests[1]));
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
  print_explanation(
      cli, cachekey::explain_hash_details(cli.args[0], cachekey::parse_hash_details(details_a),
                                          cli.args[1], cachekey::parse_hash_details(details_b)));
  return kOk;
}

int cmd_verify(Cli& cli) {
  // Work in slices (16 CAS prefixes, then the action cache) to show progress.
  std::vector<client::VerifyQuery> slices;
  for (const char c : std::string("0123456789abcdef")) {
    slices.push_back({"cas", std::string(1, c), false});
  }
  slices.push_back({"ac", "", false});
  std::map<std::string, std::size_t> checked, repaired;
  json problems = json::array();
  for (std::size_t i = 0; i < slices.size(); ++i) {
    client::VerifyQuery& slice = slices[i];
    slice.repair = cli.flags.count("repair") != 0;
    auto report = cli.client->verify(slice);
    if (!report) {
      return fail_call(report.error());
    }
    checked[slice.area] += report->checked;
    repaired[slice.area] += report->repaired;
    for (const protocol::VerifyProblem& p : report->problems) {
      problems.push_back({{"key", p.key}, {"problem", p.problem}, {"area", slice.area}});
    }
    if (!cli.json_output) {
      progress("verifying", i + 1, slices.size());
    }
  }
  if (cli.json_output) {
    std::cout << protocol::json_text(
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
  const std::string age = cli.option("older-than");
  if (max.empty() && age.empty()) {
    return usage_error("gc needs --max-size SIZE and/or --older-than AGE");
  }
  client::GcQuery query;
  if (!max.empty()) {
    auto size = protocol::parse_size(max);
    if (!size) {
      return usage_error(size.error());
    }
    query.max_size = *size;
  }
  if (!age.empty()) {
    auto seconds = protocol::parse_duration_s(age);
    if (!seconds) {
      return usage_error(seconds.error());
    }
    query.older_than_s = *seconds;
  }
  auto report = cli.client->gc(query);
  if (!report) {
    return fail_call(report.error());
  }
  if (cli.json_output) {
    std::cout << protocol::json_text(protocol::to_json(*report), 2) << "\n";
  } else {
    std::printf("removed %llu entries (%s); %s -> %s\n",
                static_cast<unsigned long long>(report->removed_entries),
                protocol::format_size(report->removed_bytes).c_str(),
                protocol::format_size(report->before_bytes).c_str(),
                protocol::format_size(report->after_bytes).c_str());
  }
  return kOk;
}

} // namespace kcache::cli
