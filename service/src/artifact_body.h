#pragma once
// GET /v1/artifacts/<key>'s parts body (wire.h), streamed from the store: the
// record, then each file's bytes a chunk at a time (chunked_blob.h), so a
// connection holds one chunk of a large artifact, never the artifact. Used
// when some file is stored as chunks; smaller artifacts are sent from one
// buffer as before.
//
// Copies per hit: the store's read of each chunk (the tier's value, then the
// frame's decoding into the chunk) and none after: the socket is written from
// the chunk. Before, the files were read whole, then copied into one parts
// body (encode_parts), and that body was held until the peer had read it.

#include <kcache/service/piece_body.h>
#include <kcache/storage/artifact_store.h>

#include <boost/asio/buffer.hpp>

#include <optional>
#include <string>
#include <vector>

namespace kcache::service {

class ArtifactBody final : public BodySource {
public:
  ArtifactBody(const storage::ArtifactStore& artifacts, storage::Artifact head);

  std::uint64_t size() const override { return size_; }
  std::uint64_t window() const override { return window_; }
  tl::expected<std::string_view, std::string> next() override;

private:
  const storage::ArtifactStore& artifacts_;
  storage::Artifact head_;
  std::uint64_t size_ = 0;
  std::uint64_t window_ = 0;
  std::size_t output_ = 0;                  // the file being sent
  std::optional<storage::BlobReader> blob_; // set while its bytes are being sent
  std::string text_;                        // the piece being sent when it is not a chunk
  bool started_ = false;
  bool failed_ = false;
};

// GET /v1/artifacts/<key>'s parts body for an artifact read whole, when its
// files are large (kGatherBytes): the framing, and the files as the store
// handed them out (moved in, not copied). The session writes its buffers()
// after the head in one gathered write, so a hit copies each file once, in
// the memory tier's read; smaller artifacts are encoded into one string (a
// copy of a few KiB costs less than the pieces). next() yields the same
// bytes piece by piece for a writer that does not gather.
class GatheredBody final : public BodySource {
public:
  static constexpr std::uint64_t kGatherBytes = 16 << 10;

  explicit GatheredBody(storage::Artifact artifact);

  std::uint64_t size() const override { return size_; }
  std::uint64_t window() const override { return size_; }
  tl::expected<std::string_view, std::string> next() override;
  // The whole body, in order; valid while this lives.
  const std::vector<boost::asio::const_buffer>& buffers() const { return buffers_; }

private:
  storage::Artifact artifact_;
  std::vector<std::string> heads_; // the prefix and the record's head, then each file's head
  std::vector<boost::asio::const_buffer> buffers_;
  std::uint64_t size_ = 0;
  std::size_t next_ = 0; // next()'s position in buffers_
};

// GET /v1/cas/<digest>'s body for a blob stored as chunks: its bytes, a
// chunk at a time (the reader checks each chunk and the whole digest).
class BlobBody final : public BodySource {
public:
  BlobBody(storage::BlobReader reader, std::uint64_t size)
      : reader_(std::move(reader)), size_(size) {}

  std::uint64_t size() const override { return size_; }
  std::uint64_t window() const override { return storage::kChunkSize; }
  tl::expected<std::string_view, std::string> next() override;

private:
  storage::BlobReader reader_;
  std::uint64_t size_;
};

} // namespace kcache::service
