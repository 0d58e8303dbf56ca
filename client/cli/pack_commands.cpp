// kcache pack-headers, and the spec reading that submit shares with it: the
// headers a spec includes from this machine's disk packed into the spec
// (kcached refuses -I DIR and includes of host paths).

#include "cli.h"
#include "file_output.h"

#include <kcache/client/pack_headers.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>

namespace kcache::cli {

namespace {

std::vector<std::string> include_dirs(const Cli& cli) {
  std::vector<std::string> dirs;
  for (auto [it, end] = cli.options.equal_range("I"); it != end; ++it) {
    dirs.push_back(it->second);
  }
  return dirs;
}

} // namespace

int read_spec(const Cli& cli, bool pack, std::string& spec) {
  std::ifstream in(cli.args[0], std::ios::binary);
  if (!in) {
    return usage_error("cannot read " + cli.args[0]);
  }
  spec.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (!pack) {
    if (cli.options.count("I") != 0) {
      return usage_error("-I DIR needs --pack-headers");
    }
    return kOk;
  }
  auto packed = client::pack_headers(spec, {.include_dirs = include_dirs(cli)});
  if (!packed) {
    std::fprintf(stderr, "kcache: %s: %s\n", cli.args[0].c_str(), packed.error().message.c_str());
    return kFailed;
  }
  spec = std::move(*packed);
  return kOk;
}

int cmd_pack_headers(Cli& cli) {
  if (cli.args.size() != 1) {
    return usage_error("pack-headers needs one SPEC.json");
  }
  std::string spec;
  if (int rc = read_spec(cli, /*pack=*/true, spec); rc != kOk) {
    return rc;
  }
  const std::string out = cli.option("o", "-");
  if (out == "-") {
    std::cout << spec << "\n";
    return kOk;
  }
  if (auto written = write_file_atomically(out, spec + "\n"); !written) {
    std::fprintf(stderr, "kcache: %s\n", written.error().c_str());
    return kFailed;
  }
  return kOk;
}

} // namespace kcache::cli
