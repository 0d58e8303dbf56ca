#include <kcache/protocol/admin.h>
#include <kcache/protocol/json_text.h>

#include <nlohmann/json.hpp>

#include <utility>

namespace kcache::protocol {

using nlohmann::json;

namespace {

[[noreturn]] void wrong_type(const json& v, const char* key, const char* expected) {
  throw json::type_error::create(302, std::string(key) + " must be " + expected, &v);
}

// Each reader leaves `out` as it is when `key` is absent, and throws a
// json::type_error when it is present with another type.
const json* member(const json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

void read(const json& object, const char* key, std::string& out) {
  if (const json* v = member(object, key)) {
    if (!v->is_string()) {
      wrong_type(*v, key, "a string");
    }
    out = v->get<std::string>();
  }
}

// Preferred to the template below (a function over a template): true/false, not 0/1.
void read(const json& object, const char* key, bool& out) {
  if (const json* v = member(object, key)) {
    if (!v->is_boolean()) {
      wrong_type(*v, key, "true or false");
    }
    out = v->get<bool>();
  }
}

template <typename T>
requires std::is_integral_v<T>
void read(const json& object, const char* key, T& out) {
  if (const json* v = member(object, key)) {
    try {
      out = json_integer<T>(*v);
    } catch (const json::type_error&) {
      wrong_type(*v, key, "an integer in range");
    }
  }
}

void read(const json& object, const char* key, double& out) {
  if (const json* v = member(object, key)) {
    if (!v->is_number()) {
      wrong_type(*v, key, "a number");
    }
    out = v->get<double>();
  }
}

// Absent or null: left empty.
template <typename T>
void read_optional(const json& object, const char* key, std::optional<T>& out) {
  if (const json* v = member(object, key); v != nullptr && !v->is_null()) {
    T value{};
    read(object, key, value);
    out = value;
  }
}

json or_null(const std::optional<std::uint64_t>& v) {
  return v ? json(*v) : json(nullptr);
}

const json& checked_object(const json& v, const char* what) {
  if (!v.is_object()) {
    wrong_type(v, what, "a JSON object");
  }
  return v;
}

// The array `key` (empty when absent), each element read by `each`.
template <typename T, typename Fn>
void read_array(const json& object, const char* key, std::vector<T>& out, Fn each) {
  if (const json* v = member(object, key)) {
    if (!v->is_array()) {
      wrong_type(*v, key, "an array");
    }
    for (const json& element : *v) {
      out.push_back(each(element));
    }
  }
}

template <typename T> T value_or_throw(tl::expected<T, std::string> value) {
  if (!value) {
    throw json::other_error::create(501, value.error(), nullptr);
  }
  return std::move(*value);
}

// Runs a reader, turning its json exceptions into "<what>: why".
template <typename Fn>
auto reading(const char* what, const json& doc, Fn fn)
    -> tl::expected<decltype(fn()), std::string> {
  try {
    checked_object(doc, what);
    return fn();
  } catch (const json::exception& e) {
    return tl::unexpected(std::string(what) + ": " + e.what());
  }
}

TierStats tier_from_json(const json& in) {
  checked_object(in, "tier");
  TierStats t;
  read(in, "name", t.name);
  read(in, "hits", t.hits);
  read(in, "misses", t.misses);
  read(in, "errors", t.errors);
  read(in, "corrupt", t.corrupt);
  read(in, "evictions", t.evictions);
  read(in, "puts", t.puts);
  read(in, "bytes_read", t.bytes_read);
  read(in, "bytes_written", t.bytes_written);
  read(in, "backfills", t.backfills);
  read(in, "rejected", t.rejected);
  read_optional(in, "bytes_stored", t.bytes_stored);
  read_optional(in, "capacity", t.capacity);
  read_optional(in, "entries", t.entries);
  return t;
}

EntrySummary summary_from_json(const json& in) {
  checked_object(in, "entry");
  EntrySummary e;
  read(in, "area", e.area);
  read(in, "key", e.key);
  read(in, "size", e.size);
  read(in, "created_ms", e.created_ms);
  read(in, "last_access_ms", e.last_access_ms);
  read(in, "hits", e.hits);
  read_optional(in, "artifact_size", e.artifact_size);
  return e;
}

} // namespace

json to_json(const Stats& stats) {
  json tiers = json::array();
  for (const TierStats& t : stats.tiers) {
    tiers.push_back({{"name", t.name},
                     {"hits", t.hits},
                     {"misses", t.misses},
                     {"errors", t.errors},
                     {"corrupt", t.corrupt},
                     {"evictions", t.evictions},
                     {"puts", t.puts},
                     {"bytes_read", t.bytes_read},
                     {"bytes_written", t.bytes_written},
                     {"backfills", t.backfills},
                     {"rejected", t.rejected},
                     {"bytes_stored", or_null(t.bytes_stored)},
                     {"capacity", or_null(t.capacity)},
                     {"entries", or_null(t.entries)}});
  }
  return json{{"uptime_s", stats.uptime_s},
              {"hits", stats.hits},
              {"misses", stats.misses},
              {"errors", stats.errors},
              {"hit_ratio", stats.hit_ratio ? json(*stats.hit_ratio) : json(nullptr)},
              {"zeroed_ms", stats.zeroed_ms},
              {"version", stats.version},
              {"git_revision", stats.git_revision},
              {"key_schema", stats.key_schema},
              {"c_abi", stats.c_abi},
              {"cluster", stats.cluster},
              {"tiers", std::move(tiers)}};
}

json to_json(const EntrySummary& e) {
  json out{{"area", e.area},
           {"key", e.key},
           {"size", e.size},
           {"created_ms", e.created_ms},
           {"last_access_ms", e.last_access_ms},
           {"hits", e.hits}};
  if (e.artifact_size) {
    out["artifact_size"] = *e.artifact_size;
  }
  return out;
}

json to_json(const EntryList& list) {
  json entries = json::array();
  for (const EntrySummary& e : list.entries) {
    entries.push_back(to_json(e));
  }
  json out{{"entries", std::move(entries)}, {"total", list.total}};
  if (list.total_estimated) {
    out["total_estimated"] = true;
  }
  return out;
}

tl::expected<json, std::string> to_json(const Entry& entry) {
  json outputs = json::array();
  for (const EntryOutput& o : entry.outputs) {
    outputs.push_back({{"name", o.name}, {"digest", o.digest}, {"size", o.size}});
  }
  json doc{{"key", entry.key},
           {"outputs", std::move(outputs)},
           {"producer", entry.producer},
           {"created_ms", entry.created_ms},
           {"metadata", entry.metadata}};
  if (!entry.manifest_json.empty()) {
    auto manifest = parse_json(entry.manifest_json);
    if (!manifest) {
      return tl::unexpected("manifest_json is not JSON: " + manifest.error());
    }
    doc["manifest"] = std::move(*manifest);
  }
  if (entry.storage) {
    doc["storage"] = to_json(*entry.storage);
  }
  return doc;
}

json to_json(const VerifyReport& report) {
  json problems = json::array();
  for (const VerifyProblem& p : report.problems) {
    problems.push_back({{"key", p.key}, {"problem", p.problem}});
  }
  return json{{"area", report.area},
              {"checked", report.checked},
              {"problems", std::move(problems)},
              {"repaired", report.repaired}};
}

json to_json(const GcReport& report) {
  return json{{"before_bytes", report.before_bytes},
              {"after_bytes", report.after_bytes},
              {"removed_entries", report.removed_entries},
              {"removed_bytes", report.removed_bytes}};
}

json to_json(const JobList& list) {
  json jobs = json::array();
  for (const JobView& job : list.jobs) {
    jobs.push_back(to_json(job, /*with_spec=*/false));
  }
  const JobList::Counts& c = list.counts;
  json doc{{"jobs", std::move(jobs)},
           {"counts",
            {{"queued", c.queued},
             {"running", c.running},
             {"finished", c.finished},
             {"workers", c.workers},
             {"queue_capacity", c.queue_capacity}}}};
  if (list.changes) {
    doc["changes"] = *list.changes;
  }
  return doc;
}

json to_json(const NodeList& list) {
  json nodes = json::array();
  for (const NodeView& n : list.nodes) {
    nodes.push_back({{"id", n.id},
                     {"version", n.version},
                     {"address", n.address},
                     {"capabilities", n.capabilities},
                     {"workers", n.workers},
                     {"queued", n.queued},
                     {"running", n.running},
                     {"started_ms", n.started_ms},
                     {"heartbeat_ms", n.heartbeat_ms}});
  }
  return json{{"nodes", std::move(nodes)}};
}

tl::expected<Stats, std::string> stats_from_json(const json& doc) {
  return reading("stats", doc, [&] {
    Stats s;
    read(doc, "uptime_s", s.uptime_s);
    read(doc, "hits", s.hits);
    read(doc, "misses", s.misses);
    read(doc, "errors", s.errors);
    read_optional(doc, "hit_ratio", s.hit_ratio);
    read(doc, "zeroed_ms", s.zeroed_ms);
    read(doc, "version", s.version);
    read(doc, "git_revision", s.git_revision);
    read(doc, "key_schema", s.key_schema);
    read(doc, "c_abi", s.c_abi);
    read(doc, "cluster", s.cluster);
    read_array(doc, "tiers", s.tiers, tier_from_json);
    return s;
  });
}

tl::expected<EntrySummary, std::string> entry_summary_from_json(const json& doc) {
  return reading("entry", doc, [&] { return summary_from_json(doc); });
}

tl::expected<EntryList, std::string> entry_list_from_json(const json& doc) {
  return reading("entry list", doc, [&] {
    EntryList list;
    read_array(doc, "entries", list.entries, summary_from_json);
    read(doc, "total", list.total);
    read(doc, "total_estimated", list.total_estimated);
    return list;
  });
}

tl::expected<Entry, std::string> entry_from_json(const json& doc) {
  return reading("entry", doc, [&] {
    Entry e;
    read(doc, "key", e.key);
    read_array(doc, "outputs", e.outputs, [](const json& in) {
      checked_object(in, "output");
      EntryOutput o;
      read(in, "name", o.name);
      read(in, "digest", o.digest);
      read(in, "size", o.size);
      return o;
    });
    read(doc, "producer", e.producer);
    read(doc, "created_ms", e.created_ms);
    if (const json* meta = member(doc, "metadata"); meta != nullptr && !meta->is_null()) {
      for (const auto& [name, value] : checked_object(*meta, "metadata").items()) {
        if (!value.is_string()) {
          wrong_type(value, "a metadata value", "a string");
        }
        e.metadata[name] = value.get<std::string>();
      }
    }
    if (const json* manifest = member(doc, "manifest");
        manifest != nullptr && !manifest->is_null()) {
      e.manifest_json = json_text(checked_object(*manifest, "manifest"));
    }
    if (const json* storage = member(doc, "storage"); storage != nullptr && !storage->is_null()) {
      e.storage = summary_from_json(*storage);
    }
    return e;
  });
}

tl::expected<VerifyReport, std::string> verify_report_from_json(const json& doc) {
  return reading("verify report", doc, [&] {
    VerifyReport r;
    read(doc, "area", r.area);
    read(doc, "checked", r.checked);
    read_array(doc, "problems", r.problems, [](const json& in) {
      checked_object(in, "problem");
      VerifyProblem p;
      read(in, "key", p.key);
      read(in, "problem", p.problem);
      return p;
    });
    read(doc, "repaired", r.repaired);
    return r;
  });
}

tl::expected<GcReport, std::string> gc_report_from_json(const json& doc) {
  return reading("gc report", doc, [&] {
    GcReport r;
    read(doc, "before_bytes", r.before_bytes);
    read(doc, "after_bytes", r.after_bytes);
    read(doc, "removed_entries", r.removed_entries);
    read(doc, "removed_bytes", r.removed_bytes);
    return r;
  });
}

tl::expected<JobList, std::string> job_list_from_json(const json& doc) {
  return reading("job list", doc, [&] {
    JobList list;
    read_array(doc, "jobs", list.jobs,
               [](const json& in) { return value_or_throw(job_from_json(in)); });
    if (const json* counts = member(doc, "counts")) {
      const json& c = checked_object(*counts, "counts");
      read(c, "queued", list.counts.queued);
      read(c, "running", list.counts.running);
      read(c, "finished", list.counts.finished);
      read(c, "workers", list.counts.workers);
      read(c, "queue_capacity", list.counts.queue_capacity);
    }
    if (member(doc, "changes") != nullptr) {
      std::uint64_t changes = 0;
      read(doc, "changes", changes);
      list.changes = changes;
    }
    return list;
  });
}

tl::expected<NodeList, std::string> node_list_from_json(const json& doc) {
  return reading("node list", doc, [&] {
    NodeList list;
    read_array(doc, "nodes", list.nodes, [](const json& in) {
      const json& node = checked_object(in, "node");
      NodeView n;
      read(node, "id", n.id);
      read(node, "version", n.version);
      read(node, "address", n.address);
      read_array(node, "capabilities", n.capabilities, [](const json& c) {
        if (!c.is_string()) {
          wrong_type(c, "capabilities", "strings");
        }
        return c.get<std::string>();
      });
      read(node, "workers", n.workers);
      read(node, "queued", n.queued);
      read(node, "running", n.running);
      read(node, "started_ms", n.started_ms);
      read(node, "heartbeat_ms", n.heartbeat_ms);
      return n;
    });
    return list;
  });
}

} // namespace kcache::protocol
