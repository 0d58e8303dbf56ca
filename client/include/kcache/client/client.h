#pragma once
// libkcache: the C++ client of kcached.
//
// Thread-safe; keeps a pool of keep-alive connections (TCP, or a Unix socket
// with unix:///path). Every operation has one deadline covering connects,
// retries and transfers. Failures are values, never exceptions: a trainer
// treats any error as a miss ("fail open"), so a daemon that is down or hung
// costs at most the deadline, and after a refused connection the client
// answers Unavailable at once for a short back-off instead of retrying each call.

#include <kcache/client/admin.h>
#include <kcache/client/artifact.h>
#include <kcache/client/http_transport.h>
#include <kcache/client/jobs.h>
#include <kcache/client/lease.h>
#include <kcache/client/verify.h>
#include <kcache/protocol/circuit_breaker.h>
#include <kcache/protocol/connection_pool.h>
#include <kcache/protocol/record_head.h>

#include <tl/expected.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kcache::client {

struct ClientOptions {
  std::string url = "http://127.0.0.1:7070"; // or https://host:port, unix:///run/kcache.sock
  std::string token;                         // sent as a bearer token if set
  std::chrono::milliseconds timeout{2000};   // the whole operation
  std::chrono::milliseconds connect_timeout{500};
  int retries = 2; // extra attempts after a transport failure
  std::chrono::milliseconds retry_backoff{20};
  std::chrono::milliseconds down_backoff{1000}; // fail fast this long after "connection refused"
  std::size_t max_idle_connections = 16;
  // https:// only: the CA bundle that signs kcached's certificate ("": the
  // system's default CA paths); a client certificate and key for mTLS. Env
  // where KCACHE_URL is read: KCACHE_CA_FILE, KCACHE_CLIENT_CERT, KCACHE_CLIENT_KEY.
  std::string ca_file;
  std::string client_cert_file;
  std::string client_key_file;
  // End-to-end verification (verify.h): every artifact get, batch_get and
  // get_or_compile return must be signed by one of trusted_keys (PEM files or
  // directories of them) and match its record, or it is a miss counted in
  // verification(). Env for the C ABI, Python and kcache.torch:
  // KCACHE_VERIFY_SIGNATURES=1, KCACHE_TRUSTED_KEYS=path[:path...].
  bool verify_signatures = false;
  std::vector<std::string> trusted_keys;
};

// producer, metadata, manifest_json: the upload's record part, written by the
// same code that kcached reads it with.
using PutOptions = protocol::RecordHead;

class Client {
public:
  // Fails on a malformed URL, or with verify_signatures on when trusted_keys
  // is empty or does not load.
  static Result<std::unique_ptr<Client>> create(ClientOptions options);
  ~Client();

  // An artifact, or nullopt on a miss.
  Result<std::optional<Artifact>> get(std::string_view key);
  // As get, but a miss while another producer holds the key's lease waits up
  // to `wait` for its put (a dead holder's lease expiry ends the wait too).
  Result<std::optional<Artifact>> get(std::string_view key, std::chrono::milliseconds wait);
  // Leases (lease.h).
  Result<Lease> acquire_lease(std::string_view key, std::chrono::milliseconds ttl,
                              std::string_view holder);
  Result<bool> renew_lease(std::string_view key, std::string_view token,
                           std::chrono::milliseconds ttl);
  Result<void> release_lease(std::string_view key, std::string_view token);
  Result<void> put(std::string_view key, const std::vector<File>& files,
                   const PutOptions& options = {});
  Result<bool> exists(std::string_view key);
  // The action record's JSON as stored (outputs, producer, writer, namespace,
  // signature: what `kcache show` verifies); a miss is an error with http_status 404.
  Result<std::string> record(std::string_view key);
  // One round trip for many keys (a restarting trainer's prefetch).
  Result<std::vector<std::optional<Artifact>>> batch_get(std::span<const std::string> keys);
  Result<void> remove(std::string_view key);
  // Compile jobs (jobs.h). A spec is CompileSpec JSON (compiler/compile_spec.h):
  // the client links no compiler and needs none of its types.
  Result<Submitted> submit(std::string_view key, std::string_view spec_json, int priority = 0);
  // With a kc1- key's manifest (JSON, as PutOptions' manifest_json): kcached
  // checks that it hashes to `key` ("": the manifest names the key) and
  // publishes under the key where the token may write the manifest's namespace.
  Result<Submitted> submit(std::string_view key, std::string_view spec_json, int priority,
                           std::string_view manifest_json);
  // The job now, or once it finished if that happens within `wait` (long-poll).
  Result<JobStatus> job(std::string_view id, std::chrono::milliseconds wait = {});
  Result<JobStatus> cancel(std::string_view id);
  // A hit at once; on a miss, a compile job, then per `request.policy` wait
  // for it (the artifact comes back) or return at once (kPending: the trainer
  // runs its fallback; a later call hits).
  Result<CompileOutcome> get_or_compile(const CompileRequest& request);

  // Inspection and maintenance (admin.h): the daemon's answers as typed
  // values, read by the code kcached renders them with. A 404 (no such
  // entry) is an error with http_status 404.
  Result<Stats> stats();
  // POST /v1/stats/zero (admin on "*"): the counters stats() shows restart
  // from zero; the answer is the stats right after.
  Result<Stats> zero_stats();
  Result<EntryList> list(const ListQuery& query = {});
  Result<Entry> entry(std::string_view key);
  Result<VerifyReport> verify(const VerifyQuery& query);
  Result<GcReport> gc(const GcQuery& query);
  Result<JobList> jobs(const JobsQuery& query = {});
  // The cluster's live nodes (404 when kcached is not in cluster mode).
  Result<NodeList> nodes();
  // kcache.torch's compile reports (/v1/runs), as the daemon's JSON text:
  // one process's report put under namespace/run/rank; the runs of a
  // namespace ("": every readable one), newest first; all ranks of one run.
  Result<void> put_run_report(std::string_view ns, std::string_view run, std::string_view rank,
                              std::string report_json);
  Result<std::string> runs(std::string_view ns = {}, std::size_t limit = 50);
  Result<std::string> run(std::string_view ns, std::string_view run);
  // Deletes one CAS blob by digest (remove() deletes an action record).
  Result<void> remove_blob(std::string_view digest);

  // Raw protocol access for tools: GET/PUT/DELETE any API path (the CLI
  // needs none: every command has a typed call above).
  Result<HttpResponse> request(HttpMethod method, std::string_view target, std::string body = {},
                               std::string_view content_type = {});

  const ClientOptions& options() const { return options_; }
  // Verified and refused artifacts so far (enabled = false with verification off).
  VerificationStats verification() const;

  struct PrivateTag {
    explicit PrivateTag() = default;
  };
  Client(PrivateTag, ClientOptions options, Endpoint endpoint);

private:
  Result<HttpResponse> round_trip(const HttpRequest& request);
  Result<HttpResponse> round_trip(const HttpRequest& request, std::chrono::milliseconds timeout);

  ClientOptions options_;
  Endpoint endpoint_;
  std::shared_ptr<TlsClientContext> tls_; // https:// only
  protocol::ConnectionPool<Connection> pool_;
  // Opened by one "connection refused" for down_backoff, then one probe.
  protocol::CircuitBreaker down_;
  std::unique_ptr<Verifier> verifier_; // null with verification off
};

// Decodes an artifact from the parts body that GET /v1/artifacts returns.
Result<Artifact> decode_artifact(std::string key, std::string_view parts_body);

} // namespace kcache::client
