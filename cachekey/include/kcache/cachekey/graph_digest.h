#pragma once
// The canonical Merkle digest of a Graph.
//
// A node's digest covers its op, its attributes (ordered by name), its output
// types and the digests of its inputs in order, never its name or its id. A
// string attribute is hashed as written plus, for each symbol name of the
// graph it contains, that symbol's canonical name: symbols are renamed in
// types, not inside strings (a string that merely equals a dim's name must not
// become another string's equal), yet "seq" naming s0 differs from "seq"
// naming s1. The
// graph digest covers the outputs in order plus the sorted multiset of all node
// digests, so it does not depend on the order independent nodes were added.
//
// Effects (is_effectful in graph.h) are the exception: they happen in program
// order, which is graph (insertion) order. An effectful node's digest also
// covers its ordinal among effectful nodes, so two random or in-place nodes
// are never merged by content and swapping two effects changes the digest;
// any other node's digest covers how many effects precede it (it may read
// state they changed). A pure node that effectful nodes read, directly or
// through pure nodes computed from it (a view aliases its base), also covers
// those reads (the effect's ordinal, the argument's position): of two
// look-alikes, the one written in place is no longer the other. In a
// graph without effects every node covers position 0, so its digest still
// ignores node order.
//
// Symbolic dims are renamed to canonical names s0, s1, ... in order of first
// appearance over the graph inputs (by position, shape before strides); symbols
// that appear only on intermediate values (data-dependent sizes) follow by
// first appearance in a canonical topological order: depth-first from the
// outputs in output order, each node after its inputs in input order; nodes no
// output reaches follow in graph order. Explicit row-major strides, over static
// or symbolic sizes, hash as omitted strides.

#include <kcache/cachekey/graph.h>
#include <kcache/cachekey/sha256.h>

#include <map>
#include <string>
#include <vector>

namespace kcache::cachekey {

using SymbolMap = std::map<std::string, std::string, std::less<>>;

struct GraphDigest {
  Digest root{};
  std::vector<Digest> node_digests; // indexed by NodeId
  SymbolMap symbols;                // given symbol name -> canonical name
};

GraphDigest digest_graph(const Graph& graph);

// Canonical rendering of a type after symbol renaming (used by explain).
std::string canonical_type_string(const TensorType& type, const SymbolMap& symbols);

} // namespace kcache::cachekey
