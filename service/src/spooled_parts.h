#pragma once
// PUT /v1/artifacts/<key>'s parts body (wire.h) parsed where it lies in the
// upload spool instead of in memory (issue 13: the main upload route held
// whole bodies). The framing is indexed first (names and sizes only, so a
// malformed body is a 400 before anything is stored), then each file is read
// back and stored a chunk at a time, hashed as it goes: an upload costs the
// daemon one chunk whatever its size.
//
// Bounds a body held in memory never needed (it was bounded by its size):
// the parts' names, the record part, and the number of parts, so what the
// index and the record hold stays small however the body is built.

#include "upload_spool.h"

#include <kcache/storage/artifact_store.h>

#include <tl/expected.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kcache::service {

inline constexpr std::uint64_t kMaxSpooledPartName = 4096;
inline constexpr std::uint64_t kMaxSpooledNames = 1 << 20; // all parts' names together
inline constexpr std::uint64_t kMaxSpooledRecordPart = 4 << 20;
inline constexpr std::uint64_t kMaxSpooledParts = 10'000;

struct SpooledPart {
  std::string name;
  std::uint64_t offset = 0; // of its bytes in the body
  std::uint64_t size = 0;
};

struct PartsError {
  bool malformed = true; // a 400; false: the spool could not be read (500)
  std::string message;
};

// The parts' names and places, the framing checked as decode_parts does.
tl::expected<std::vector<SpooledPart>, PartsError> index_spooled_parts(UploadSpool& spool);

// Stores one part's bytes as a CAS blob (whole up to kChunkThreshold, as
// chunks over it, as ArtifactStore::put does) and returns its output.
storage::Result<storage::OutputRef> store_spooled_part(storage::Store& store, UploadSpool& spool,
                                                       const SpooledPart& part);

} // namespace kcache::service
