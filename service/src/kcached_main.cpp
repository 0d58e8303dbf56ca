// kcached: the kcache daemon. See `kcached --help` and service/config.h.

#include <kcache/protocol/build_info.h>
#include <kcache/service/config.h>
#include <kcache/service/service.h>
#include <kcache/service/signing.h>

#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <string_view>

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--version") {
      std::puts(kcache::protocol::version_line("kcached").c_str());
      return 0;
    }
  }
  auto config = kcache::service::parse_command_line(argc, argv);
  if (!config) {
    std::fprintf(stderr, "%s\n", config.error().c_str());
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(config->log_level));
  if (config->signing.print_public_key) {
    // For other nodes' [signing] trusted_keys (and clients' KCACHE_TRUSTED_KEYS).
    const std::string path = kcache::service::signing_key_path(config->signing, config->data_dir);
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    auto key = kcache::protocol::SigningKey::load_or_generate(path);
    if (!key) {
      std::fprintf(stderr, "%s\n", key.error().c_str());
      return 1;
    }
    std::fputs(key->public_pem().c_str(), stdout);
    return 0;
  }
  auto service = kcache::service::Service::create(*config);
  if (!service) {
    spdlog::critical("{}", service.error());
    return 1;
  }
  return (*service)->run();
}
