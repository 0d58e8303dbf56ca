#pragma once
// An artifact as the client sees it: its action record and its files.

#include <string>
#include <vector>

namespace kcache::client {

struct File {
  std::string name;
  std::string data;
  friend bool operator==(const File&, const File&) = default;
};

struct Artifact {
  std::string key;
  std::string record_json; // the action record: outputs, producer, metadata, manifest
  std::vector<File> files;
};

} // namespace kcache::client
