#pragma once
// Where a job's result goes: the artifact store, under the compile key and
// under every client key that asked for it, before any waiter is woken (a
// woken client's next get is a hit). Also answers "is it compiled already?"
// at submission and reads compiled variants back for autotune benchmarks.
//
// Thread-safe as the store is: it keeps no state of its own but the
// listener, which a mutex guards.

#include <kcache/compiler/backend.h>
#include <kcache/storage/artifact_store.h>
#include <kcache/storage/record_signer.h>

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace kcache::service {

class JobPublisher {
public:
  // With a signer, every record it stores is signed (the job's submitter as writer).
  explicit JobPublisher(storage::Store& store, const storage::RecordSigner* signer = nullptr);

  // Why `key` needs no compile ("already in the cache"; or, when the compile
  // key has it, linked under `key` too, with `manifest_json` when it is a
  // kc1- key's), or nullopt when it does.
  std::optional<std::string> cached(const std::string& key, const std::string& compile_key,
                                    const std::string& manifest_json = {});
  bool has(const std::string& key);
  // The first file of the artifact under `key` (a compiled variant).
  std::optional<std::string> first_file(const std::string& key);

  struct CompileMetadata {
    std::string job_id, compile_key, backend, target, output;
    std::map<std::string, std::string> toolchain; // what the key was computed with
    std::string submitter;                        // the records' writer
  };
  // Stores a compile's result under every key `keys()` returns; calls it
  // again until it adds no key (submissions may join while this runs). A
  // kc1- key in `manifests` (Job::manifests; read after each keys() call, so
  // keys() may refresh it) is stored with its manifest, in its namespace.
  tl::expected<void, std::string>
  publish_compile(const compiler::CompileResult& result, const CompileMetadata& meta,
                  const std::function<std::vector<std::string>()>& keys,
                  const std::map<std::string, std::string>& manifests = {});

  // Stores an autotune search's winner and its tuning table under each key.
  tl::expected<void, std::string> publish_winner(const std::vector<std::string>& keys,
                                                 const std::string& file_name,
                                                 const std::string& binary,
                                                 const std::string& table_json,
                                                 const std::map<std::string, std::string>& metadata,
                                                 const std::string& writer = {});

  // Called with each key a result was just stored under, on the storing
  // thread: kcached ends the key's lease with it (LeaseTable::notify_put), so
  // the lease's waiters wake on a job's result as on a client's put. Set
  // once, while jobs may already run (recovered ones): until then, none.
  void on_stored(std::function<void(const std::string& key)> listener);

private:
  void announce(const std::string& key); // to the listener
  // `manifest_json`, when it is a manifest of `key`; else nullopt (logged
  // when there was one: the record is stored without it, in no namespace).
  static std::optional<cachekey::KeyManifest> manifest_of(const std::string& key,
                                                          const std::string& manifest_json);

  storage::ArtifactStore artifacts_;
  const std::string producer_; // "kcache-worker@<host>"
  std::mutex listener_mu_;
  std::function<void(const std::string&)> listener_;
};

} // namespace kcache::service
