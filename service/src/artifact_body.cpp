#include "artifact_body.h"

#include <kcache/protocol/wire.h>

#include <spdlog/spdlog.h>

#include <algorithm>

namespace kcache::service {

namespace wire = protocol::wire;

namespace {
constexpr std::string_view kRecordPart = "record";
} // namespace

ArtifactBody::ArtifactBody(const storage::ArtifactStore& artifacts, storage::Artifact head)
    : artifacts_(artifacts), head_(std::move(head)) {
  size_ = wire::kPartsPrefixSize + wire::part_head_size(kRecordPart) + head_.record_json.size();
  window_ = size_; // the first piece: the prefix and the record
  for (const storage::OutputRef& out : head_.record.outputs) {
    size_ += wire::part_head_size(out.name) + out.size;
    // The largest piece held: a chunk, or a blob stored whole (at most the threshold).
    const std::uint64_t piece = out.chunks.empty() ? out.size : storage::kChunkSize;
    window_ = std::max(window_, std::max(piece, wire::part_head_size(out.name)));
  }
}

tl::expected<std::string_view, std::string> ArtifactBody::next() {
  if (failed_) {
    return tl::unexpected(std::string("the artifact's body already failed"));
  }
  if (!started_) {
    started_ = true;
    text_ = wire::encode_parts_prefix(head_.record.outputs.size() + 1) +
            wire::encode_part_head(kRecordPart, head_.record_json.size());
    text_ += head_.record_json.view();
    return std::string_view(text_);
  }
  text_.clear();
  while (output_ < head_.record.outputs.size()) {
    const storage::OutputRef& out = head_.record.outputs[output_];
    if (!blob_) {
      blob_.emplace(artifacts_.reader(out));
      text_ = wire::encode_part_head(out.name, out.size);
      return std::string_view(text_);
    }
    auto piece = blob_->next();
    if (!piece) {
      failed_ = true;
      spdlog::warn("artifact {}: response cut short: {}", head_.record.key, piece.error().message);
      return tl::unexpected(piece.error().message);
    }
    if (piece->has_value()) {
      if ((*piece)->empty()) {
        continue; // an empty file: nothing to send
      }
      return **piece;
    }
    blob_.reset();
    ++output_;
  }
  return std::string_view();
}

GatheredBody::GatheredBody(storage::Artifact artifact) : artifact_(std::move(artifact)) {
  heads_.reserve(artifact_.files.size() + 1);
  heads_.push_back(wire::encode_parts_prefix(artifact_.files.size() + 1) +
                   wire::encode_part_head(kRecordPart, artifact_.record_json.size()));
  for (const storage::ArtifactFile& f : artifact_.files) {
    heads_.push_back(wire::encode_part_head(f.name, f.data.size()));
  }
  // heads_ no longer grows: the buffers may point into its strings.
  auto add = [this](std::string_view bytes) {
    if (!bytes.empty()) {
      buffers_.emplace_back(bytes.data(), bytes.size());
      size_ += bytes.size();
    }
  };
  add(heads_.front());
  add(artifact_.record_json);
  for (std::size_t i = 0; i < artifact_.files.size(); ++i) {
    add(heads_[i + 1]);
    add(artifact_.files[i].data);
  }
}

tl::expected<std::string_view, std::string> GatheredBody::next() {
  if (next_ == buffers_.size()) {
    return std::string_view();
  }
  const boost::asio::const_buffer& b = buffers_[next_++];
  return std::string_view(static_cast<const char*>(b.data()), b.size());
}

tl::expected<std::string_view, std::string> BlobBody::next() {
  while (true) {
    auto piece = reader_.next();
    if (!piece) {
      return tl::unexpected(piece.error().message); // logged by the reader
    }
    if (!piece->has_value()) {
      return std::string_view();
    }
    if (!(*piece)->empty()) {
      return **piece;
    }
  }
}

} // namespace kcache::service
