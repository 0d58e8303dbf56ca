// kcached: the kcache daemon. See `kcached --help` and service/config.h.

#include <kcache/service/config.h>
#include <kcache/service/service.h>
#include <kcache/service/signing.h>

#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>

int main(int argc, char** argv) {
  auto config = kcache::service::parse_command_line(argc, argv);
  if (!config) {
    // --help and --version: stdout, 0; a bad command line: stderr, 2.
    std::fprintf(config.error().code == 0 ? stdout : stderr, "%s\n", config.error().text.c_str());
    return config.error().code;
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
