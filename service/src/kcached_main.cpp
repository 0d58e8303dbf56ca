// kcached: the kcache daemon. See `kcached --help` and service/config.h.

#include <kcache/service/config.h>
#include <kcache/service/service.h>

#include <spdlog/spdlog.h>

#include <cstdio>

int main(int argc, char** argv) {
  auto config = kcache::service::parse_command_line(argc, argv);
  if (!config) {
    std::fprintf(stderr, "%s\n", config.error().c_str());
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(config->log_level));
  auto service = kcache::service::Service::create(*config);
  if (!service) {
    spdlog::critical("{}", service.error());
    return 1;
  }
  return (*service)->run();
}
