// What kcached's settings mean together: role names, the transport and
// worker-memory checks, the tiers' store URLs. Reading them: config_file.cpp
// (TOML), command_line.cpp (flags, KCACHED_*), settings_table.cpp (the table).

#include <kcache/protocol/enum_names.h>
#include <kcache/service/config.h>

#include <boost/asio/ip/address.hpp>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace kcache::service {
namespace {

tl::unexpected<std::string> fail(std::string message) {
  return tl::unexpected(std::move(message));
}

constexpr protocol::EnumNames<Role, 4> kRoles({{{Role::kRead, "read"},
                                                {Role::kSubmit, "submit"},
                                                {Role::kWrite, "write"},
                                                {Role::kAdmin, "admin"}}});

} // namespace

tl::expected<Role, std::string> parse_role(std::string_view name) {
  return kRoles.parse_or_error("role", name);
}

std::string_view role_name(Role role) {
  return kRoles.name(role);
}

tl::expected<void, std::string> check_transport_security(const ServiceConfig& config) {
  if (config.tls.enabled() && (config.tls.cert_file.empty() || config.tls.key_file.empty())) {
    return fail("[tls] needs both cert_file and key_file (--tls-cert, --tls-key)");
  }
  if (config.tls.min_version != "1.2" && config.tls.min_version != "1.3") {
    return fail("tls.min_version must be \"1.2\" or \"1.3\", got \"" + config.tls.min_version +
                "\"");
  }
  if (config.listen.empty() || config.tls.enabled() || config.tokens.empty() ||
      config.allow_plain_http) {
    return {};
  }
  std::string host = config.listen.substr(0, config.listen.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(host, ec);
  if (!ec && address.is_loopback()) {
    return {};
  }
  return fail("listen = \"" + config.listen +
              "\" serves plain HTTP beyond this host while tokens are configured: bearer "
              "tokens and artifacts would cross the network in clear text. Configure [tls] "
              "cert_file and key_file (--tls-cert, --tls-key), listen on 127.0.0.1, or set "
              "allow_plain_http = true (--allow-plain-http) behind a TLS proxy");
}

std::uint64_t host_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  std::uint64_t bytes = pages > 0 && page_size > 0 ? static_cast<std::uint64_t>(pages) *
                                                         static_cast<std::uint64_t>(page_size)
                                                   : 0;
  // In a container the cgroup's limit is what the OOM killer enforces.
  if (std::ifstream in("/sys/fs/cgroup/memory.max"); in) {
    std::string text;
    in >> text;
    std::uint64_t limit = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), limit);
    if (ec == std::errc() && ptr == text.data() + text.size() && limit > 0 &&
        (bytes == 0 || limit < bytes)) {
      bytes = limit; // "max" means no limit and does not parse
    }
  }
  return bytes;
}

void fit_default_worker_memory(JobsConfig& jobs, std::uint64_t host_memory) {
  if (!jobs.memory_configured && jobs.workers > 0 && host_memory > 0 &&
      jobs.memory_bytes > host_memory / jobs.workers) {
    jobs.memory_bytes = host_memory / jobs.workers;
  }
}

tl::expected<void, std::string> check_worker_memory(const JobsConfig& jobs,
                                                    std::uint64_t host_memory) {
  // 0 workers compile nothing; a memory limit of 0 is unlimited (sanitizer
  // builds), which no sum can bound; an unknown host memory cannot be compared.
  if (jobs.force_worker_memory || jobs.workers == 0 || jobs.memory_bytes == 0 || host_memory == 0) {
    return {};
  }
  const auto gib = [](std::uint64_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1ULL << 30));
    return std::string(text);
  };
  const std::uint64_t sum = jobs.memory_bytes * jobs.workers;
  if (sum / jobs.workers != jobs.memory_bytes || sum > host_memory) {
    return fail(std::to_string(jobs.workers) + " workers x " + gib(jobs.memory_bytes) +
                " worker memory = " + gib(sum) + " exceeds this host's memory of " +
                gib(host_memory) +
                ": lower jobs.workers or jobs.memory (--workers, --worker-memory), or start "
                "anyway with --force-worker-memory (force_worker_memory = true)");
  }
  return {};
}

tl::expected<void, std::string> check_eviction_scope(const ServiceConfig& config) {
  if (config.evict_older_than.empty()) {
    return {};
  }
  for (const std::string& url : store_urls(config)) {
    if (url.starts_with("redis://")) {
      return fail("evict_older_than (--evict-older-than) removes what this node has not read "
                  "from every tier, and the Redis tier (" +
                  std::string(config.redis_url.empty() ? "stores" : "redis_url") +
                  ") is shared by every node: entries other nodes read would go too. Let Redis "
                  "age them instead (ttl_s in the redis:// URL, or its maxmemory policy) and "
                  "leave evict_older_than unset here");
    }
  }
  return {};
}

std::vector<std::string> store_urls(const ServiceConfig& config) {
  if (!config.stores.empty()) {
    return config.stores;
  }
  std::vector<std::string> urls = {"memory://?capacity=" + std::to_string(config.memory_capacity),
                                   "rocksdb://" +
                                       std::filesystem::absolute(config.data_dir).string() +
                                       "?capacity=" + std::to_string(config.disk_capacity)};
  if (!config.redis_url.empty()) {
    urls.push_back(config.redis_url);
  }
  return urls;
}

std::string find_worker_binary() {
  if (const char* env = std::getenv("KCACHE_WORKER_BINARY"); env != nullptr && *env != '\0') {
    return env;
  }
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    return {};
  }
  for (const std::filesystem::path& candidate :
       {self.parent_path() / "kcache-worker",
        self.parent_path().parent_path() / "compiler" / "kcache-worker"}) {
    if (::access(candidate.c_str(), X_OK) == 0) {
      return candidate.string();
    }
  }
  return {};
}

} // namespace kcache::service
