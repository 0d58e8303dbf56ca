#include <kcache/cachekey/sha256.h>
#include <kcache/storage/artifact_store.h>
#include <kcache/storage/maintenance.h>

#include <algorithm>

namespace kcache::storage {

namespace {

// One CAS blob: present, hashing to its key.
Result<void> verify_blob(Store& store, const ObjectInfo& info, bool repair, VerifyReport& report) {
  // A frame that fails verification is deleted by the read itself.
  auto blob = store.get(Area::kCas, info.key);
  if (!blob) {
    return tl::unexpected(blob.error());
  }
  if (!blob->has_value()) {
    report.problems.push_back({info.key, "unreadable (corrupt frame, deleted)"});
    ++report.repaired;
  } else if (cachekey::to_hex(cachekey::Sha256::of(**blob)) != info.key) {
    report.problems.push_back({info.key, "content does not hash to its key"});
    if (repair && store.remove(Area::kCas, info.key)) {
      ++report.repaired;
    }
  }
  return {};
}

// One action record: parseable, naming only blobs the CAS holds.
Result<void> verify_record(Store& store, ArtifactStore& artifacts, const ObjectInfo& info,
                           bool repair, VerifyReport& report) {
  auto record = artifacts.get_record(info.key); // deletes unparseable records
  if (!record) {
    return tl::unexpected(record.error());
  }
  if (!record->has_value()) {
    report.problems.push_back({info.key, "unreadable record (deleted)"});
    ++report.repaired;
    return {};
  }
  for (const OutputRef& out : (*record)->outputs) {
    // A tier that cannot say is not evidence of a missing blob. A chunked
    // blob (chunked_blob.h) is present when all its chunks are.
    auto present = artifacts.reader(out).present();
    if (present && !*present) {
      report.problems.push_back(
          {info.key, "output '" + out.name + "' blob " + out.digest + " is missing"});
      if (repair && store.remove(Area::kAction, info.key)) {
        ++report.repaired;
      }
      break;
    }
  }
  return {};
}

} // namespace

Result<VerifyReport> verify_entries(Store& store, const VerifyOptions& options) {
  ListOptions list;
  list.area = options.area;
  list.prefix = options.prefix;
  auto listed = store.list(list);
  if (!listed) {
    return tl::unexpected(listed.error());
  }
  VerifyReport report;
  report.area = options.area;
  report.checked = listed->size();
  ArtifactStore artifacts(store);
  for (const ObjectInfo& info : *listed) {
    auto checked = options.area == Area::kCas
                       ? verify_blob(store, info, options.repair, report)
                       : verify_record(store, artifacts, info, options.repair, report);
    if (!checked) {
      return tl::unexpected(checked.error());
    }
  }
  return report;
}

Result<GcReport> collect_garbage(Store& store, std::uint64_t max_bytes) {
  auto listed = store.list({});
  if (!listed) {
    return tl::unexpected(listed.error());
  }
  GcReport report;
  for (const ObjectInfo& info : *listed) {
    report.before_bytes += info.size;
  }
  std::uint64_t total = report.before_bytes;
  std::sort(listed->begin(), listed->end(),
            [](const auto& a, const auto& b) { return a.last_access_ms < b.last_access_ms; });
  for (const ObjectInfo& info : *listed) {
    if (total <= max_bytes) {
      break;
    }
    if (auto ok = store.remove(info.area, info.key); !ok) {
      return tl::unexpected(ok.error());
    }
    total -= info.size;
    ++report.removed_entries;
  }
  report.after_bytes = total;
  report.removed_bytes = report.before_bytes - total;
  return report;
}

Result<GcReport> collect_older_than(Store& store, const AgeGcOptions& options) {
  auto listed = store.list({});
  if (!listed) {
    return tl::unexpected(listed.error());
  }
  const std::int64_t now = options.now_ms != 0 ? options.now_ms : unix_now_ms();
  const std::int64_t cutoff = now - options.older_than.count();
  GcReport report;
  for (const ObjectInfo& info : *listed) {
    report.before_bytes += info.size;
    const std::int64_t last = std::max(info.last_access_ms, info.created_ms);
    if (last == 0 || last >= cutoff) {
      continue;
    }
    if (auto ok = store.remove(info.area, info.key); !ok) {
      return tl::unexpected(ok.error());
    }
    ++report.removed_entries;
    report.removed_bytes += info.size;
  }
  report.after_bytes = report.before_bytes - report.removed_bytes;
  return report;
}

} // namespace kcache::storage
