/* libkcache's stable C ABI: any language can link it (the Python package
 * loads it with ctypes). Opaque handles, status codes, and buffers that the
 * library allocates and kcache_buffer_free releases.
 *
 * Fail-open contract: kcache_get on a daemon that is down or hung returns
 * KCACHE_ERR_UNAVAILABLE or KCACHE_ERR_TIMEOUT within the client's timeout;
 * callers treat every status other than KCACHE_OK as a miss.
 *
 * Thread safety: one client may be used from many threads at once.
 * ABI version: KCACHE_ABI_VERSION; additions only, never changes.
 */
#ifndef KCACHE_KCACHE_H
#define KCACHE_KCACHE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* C names are snake_case by convention; C++ naming rules do not apply here. */
/* NOLINTBEGIN(readability-identifier-naming) */
/* 6: kcache_client_open_ext (TLS); 7: kcache_submit_manifest; 8: run reports */
#define KCACHE_ABI_VERSION 8
#define KCACHE_API __attribute__((visibility("default")))

typedef enum kcache_status {
  KCACHE_OK = 0,
  KCACHE_MISS = 1,            /* no entry for the key */
  KCACHE_ERR_INVALID = 2,     /* bad argument (URL, key, null pointer) */
  KCACHE_ERR_UNAVAILABLE = 3, /* daemon unreachable */
  KCACHE_ERR_TIMEOUT = 4,     /* deadline passed */
  KCACHE_ERR_REJECTED = 5,    /* the daemon refused the request (4xx) */
  KCACHE_ERR_SERVER = 6,      /* the daemon failed (5xx) */
  KCACHE_ERR_PROTOCOL = 7,    /* an answer that does not parse */
  /* ABI 2: compile jobs */
  KCACHE_PENDING = 8,        /* a compile job is queued or running; ask again later */
  KCACHE_COMPILE_FAILED = 9, /* the compile failed (now or recently): see the info JSON */
  KCACHE_BUSY = 10           /* the compile queue is full; retry later */
} kcache_status;

typedef struct kcache_client kcache_client;

/* Bytes owned by the library until kcache_buffer_free. */
typedef struct kcache_buffer {
  uint8_t* data;
  size_t size;
} kcache_buffer;

typedef struct kcache_options {
  const char* url;    /* http://host:port, https://host:port or unix:///path;
                        NULL: $KCACHE_URL or http://127.0.0.1:7070 */
  const char* token;  /* bearer token or NULL */
  int32_t timeout_ms; /* whole operation; <= 0: 2000 */
  int32_t retries;    /* < 0: 2 */
} kcache_options;

KCACHE_API int kcache_abi_version(void);
KCACHE_API const char* kcache_status_name(kcache_status status);

/* ABI 6: options beyond kcache_options, in a struct that only grows at its
 * end: set struct_size = sizeof(kcache_options_ext); the library reads the
 * fields that size covers, so a caller built against an older header keeps
 * working. NULL fields fall back to their environment variables. */
typedef struct kcache_options_ext {
  size_t struct_size;
  const char* ca_file; /* https://: PEM CA bundle; NULL: $KCACHE_CA_FILE, else the system CAs */
  const char* client_cert_file; /* mTLS certificate (PEM); NULL: $KCACHE_CLIENT_CERT */
  const char* client_key_file;  /* its private key (PEM); NULL: $KCACHE_CLIENT_KEY */
  /* End-to-end verification: with it on, every artifact a get, batch get or
   * get_or_compile returns is signed by a trusted key and its bytes are the
   * signed record's, or it is KCACHE_MISS, counted in kcache_verification_stats.
   * On without a usable trusted key fails the open. */
  const char* trusted_keys;  /* PEM public keys: files or dirs, ':'-separated;
                                NULL: $KCACHE_TRUSTED_KEYS */
  int32_t verify_signatures; /* 1: on, -1: off, 0: $KCACHE_VERIFY_SIGNATURES (1/true) */
} kcache_options_ext;

/* options may be NULL. On failure *out is NULL and the message is available
 * through kcache_last_error(NULL). kcache_client_open(o, out) is
 * kcache_client_open_ext(o, NULL, out). */
KCACHE_API kcache_status kcache_client_open(const kcache_options* options, kcache_client** out);
KCACHE_API kcache_status kcache_client_open_ext(const kcache_options* options,
                                                const kcache_options_ext* ext, kcache_client** out);
KCACHE_API void kcache_client_close(kcache_client* client);

/* The message of this thread's last failed call (empty if none). Valid until
 * the thread's next call. */
KCACHE_API const char* kcache_last_error(void);

/* Single-value entries (a key holding one file named "value"): what remote
 * caches such as Inductor's need. */
KCACHE_API kcache_status kcache_get(kcache_client* client, const char* key, kcache_buffer* value);
KCACHE_API kcache_status kcache_put(kcache_client* client, const char* key, const uint8_t* data,
                                    size_t size);
KCACHE_API kcache_status kcache_exists(kcache_client* client, const char* key);

/* Looks up n keys in one round trip. values[i] is filled for hits; statuses[i]
 * is KCACHE_OK or KCACHE_MISS. Returns an error only if the batch failed as a whole. */
KCACHE_API kcache_status kcache_batch_get(kcache_client* client, const char* const* keys, size_t n,
                                          kcache_buffer* values, kcache_status* statuses);

/* GET /v1/stats as JSON. */
KCACHE_API kcache_status kcache_stats(kcache_client* client, kcache_buffer* json);

/* ABI 2: compile jobs. spec_json is a compile spec (see compiler/compile_spec.h:
 * {"backend": "cuda", "source": {"name", "text"}, "name_expressions": [...],
 *  "options": [...], "target": "sm_90a", "output": "cubin"}). */

/* Submits a compile whose result is published under key (may be NULL: the
 * compile key only). answer: the daemon's JSON ({"status", "job", ...}).
 * KCACHE_OK when queued, joined, already cached or recently failed (see
 * "status"); KCACHE_BUSY when the queue is full. */
KCACHE_API kcache_status kcache_submit(kcache_client* client, const char* key,
                                       const char* spec_json, int32_t priority,
                                       kcache_buffer* answer);
/* ABI 7: kcache_submit with a kc1- key's manifest (JSON, as kcache_put_record's
 * "manifest"): kcached checks that it hashes to key (NULL: the manifest's key)
 * and publishes under key where the token may write the manifest's namespace
 * (else the answer's "client_key_refused" says why). NULL manifest_json: as
 * kcache_submit. */
KCACHE_API kcache_status kcache_submit_manifest(kcache_client* client, const char* key,
                                                const char* spec_json, const char* manifest_json,
                                                int32_t priority, kcache_buffer* answer);
/* Waits up to timeout_ms for a job to finish. job_json: the job. KCACHE_OK
 * once finished (any outcome: see "state"), KCACHE_PENDING if still running. */
KCACHE_API kcache_status kcache_job_wait(kcache_client* client, const char* job_id,
                                         int32_t timeout_ms, kcache_buffer* job_json);

#define KCACHE_COMPILE_ASYNC 1 /* submit and return KCACHE_PENDING at once on a miss */

/* A hit, or a compile through the service. KCACHE_OK: binary holds the
 * artifact's first file (the CUBIN, PTX, object or shared object) and info
 * {"outcome": "hit"|"compiled", "record": {...}, "job": {...}}. Otherwise
 * KCACHE_PENDING (async, or timeout_ms passed), KCACHE_COMPILE_FAILED (info
 * has the job with its error and log), KCACHE_BUSY, or an error: a miss for a
 * trainer that falls back. timeout_ms <= 0: 300000. info may be NULL. */
KCACHE_API kcache_status kcache_get_or_compile(kcache_client* client, const char* key,
                                               const char* spec_json, int32_t flags,
                                               int32_t timeout_ms, kcache_buffer* binary,
                                               kcache_buffer* info);

/* ABI 3: leases, single-flight for producers outside the service (a rank that
 * compiles itself). The first to ask gets the lease and produces; the others
 * wait in kcache_get_wait for its put. A holder that dies stops renewing, and
 * its lease ends after ttl_ms. */

/* KCACHE_OK: granted; token (a C string, freed with kcache_buffer_free) is
 * for renew and release. KCACHE_MISS: someone else holds it (info, if not
 * NULL: {"holder", "expires_in_ms"}), or the key is already stored
 * ({"cached": true}). */
KCACHE_API kcache_status kcache_lease_acquire(kcache_client* client, const char* key,
                                              int32_t ttl_ms, const char* holder,
                                              kcache_buffer* token, kcache_buffer* info);
/* KCACHE_OK, or KCACHE_ERR_REJECTED when the token no longer holds the lease. */
KCACHE_API kcache_status kcache_lease_renew(kcache_client* client, const char* key,
                                            const char* token, int32_t ttl_ms);
KCACHE_API kcache_status kcache_lease_release(kcache_client* client, const char* key,
                                              const char* token);
/* As kcache_get; a miss while another producer holds the key's lease waits up
 * to wait_ms for its put (or the lease's end). */
KCACHE_API kcache_status kcache_get_wait(kcache_client* client, const char* key, int32_t wait_ms,
                                         kcache_buffer* value);

/* ABI 4: single-value entries with their action record, for clients that
 * keep their own details next to a value (kcache.torch keeps Inductor's hash
 * details there, for `kcache explain`). record_json may be NULL or
 * {"producer": "...", "metadata": {"name": "text", ...}, "manifest": {...}};
 * metadata values that are not strings are stored as their JSON text. */
KCACHE_API kcache_status kcache_put_record(kcache_client* client, const char* key,
                                           const char* record_json, const uint8_t* data,
                                           size_t size);
/* As kcache_get_wait; record_json (if not NULL) gets the stored action record
 * ({"key", "producer", "metadata", "outputs", ...}). */
KCACHE_API kcache_status kcache_get_record(kcache_client* client, const char* key, int32_t wait_ms,
                                           kcache_buffer* value, kcache_buffer* record_json);

/* ABI 5: kcache_pack_headers. kcached refuses specs whose options name host
 * paths (-I DIR, -isystem, ...) or whose sources include absolute or ".."
 * paths. This packs the headers a spec includes from this machine's disk into
 * its "headers", under the names they are included by: it searches the
 * spec's own include dirs (which it removes from "options"), then
 * include_dirs[0..n_dirs), as the compiler would; an include found nowhere is
 * left to the toolchain. out_json: the packed spec. Needs no client.
 * KCACHE_ERR_INVALID (see kcache_last_error) for two files under one name,
 * an absolute or ".." include, an unreadable file or more than 64 MiB or
 * 10000 headers. See kcache/client/pack_headers.h. */
KCACHE_API kcache_status kcache_pack_headers(const char* spec_json, const char* const* include_dirs,
                                             size_t n_dirs, kcache_buffer* out_json);

/* ABI 6: what end-to-end verification did: {"enabled", "verified",
 * "rejected": {"unsigned", "unknown-key", "bad-signature", "malformed",
 * "content-mismatch"}, "rejected_total", "last_rejection": "<key>: <reason>: <why>"}. */
KCACHE_API kcache_status kcache_verification_stats(kcache_client* client, kcache_buffer* json);

KCACHE_API void kcache_buffer_free(kcache_buffer* buffer);

/* ABI 8: kcache.torch's compile reports (/v1/runs). kcache_run_report_put
 * stores one process's report (a JSON object) under namespace/run/rank;
 * kcache_runs lists runs (ns NULL or "": every readable namespace), newest
 * first; kcache_run gets every rank's report of one run. Answers are the
 * daemon's JSON. */
KCACHE_API kcache_status kcache_run_report_put(kcache_client* client, const char* ns,
                                               const char* run, const char* rank,
                                               const char* report_json);
KCACHE_API kcache_status kcache_runs(kcache_client* client, const char* ns, int32_t limit,
                                     kcache_buffer* json);
KCACHE_API kcache_status kcache_run(kcache_client* client, const char* ns, const char* run,
                                    kcache_buffer* json);

/* NOLINTEND(readability-identifier-naming) */

#ifdef __cplusplus
}
#endif

#endif /* KCACHE_KCACHE_H */
