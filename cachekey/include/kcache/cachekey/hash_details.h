#pragma once
// Hash details from clients that compute their own keys, such as Inductor's
// FX-graph and AOTAutograd caches: one "[hash] field: value" line per input of
// the key (the lines Inductor logs as "FX graph cache hash details"). Two
// entries' details say which inputs made their keys differ, as key manifests
// do for kcache's own keys.

#include <kcache/cachekey/explain.h>

#include <string>
#include <string_view>
#include <vector>

namespace kcache::cachekey {

struct HashDetail {
  std::string field; // "gm", "example_inputs[0]", "fx_kwargs[static_input_idxs]"
  std::string hash;
  std::string value; // Inductor's text of the input, maybe truncated
};

// Lines that do not look like "[hash] field: value" are kept whole as a field
// with an empty hash, so nothing a client stored is dropped.
std::vector<HashDetail> parse_hash_details(const std::vector<std::string>& lines);

// One diff per field whose hash differs or that only one side has, in the
// order of A's lines, then B's.
Explanation explain_hash_details(std::string key_a, const std::vector<HashDetail>& a,
                                 std::string key_b, const std::vector<HashDetail>& b);

} // namespace kcache::cachekey
