// Prometheus' standard process metrics (the names every exporter uses, so
// stock dashboards and alerts work) and kcache_build_info, collected at
// scrape time from /proc/self and getrusage.

#include <kcache/protocol/build_info.h>
#include <kcache/service/metrics.h>

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>

namespace kcache::service {

namespace {

// Resident bytes: statm's second field, in pages.
std::optional<double> resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t size_pages = 0;
  std::uint64_t resident_pages = 0;
  if (!(statm >> size_pages >> resident_pages)) {
    return std::nullopt;
  }
  return static_cast<double>(resident_pages) * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

std::optional<double> open_fds() {
  std::error_code ec;
  double n = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++n;
  }
  return ec ? std::nullopt : std::optional<double>(n - 1); // less the iterator's own
}

std::optional<double> max_fds() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) {
    return std::nullopt;
  }
  return static_cast<double>(limit.rlim_cur);
}

double cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// Unix seconds: the boot time (/proc/stat's btime) plus the process's start
// in clock ticks after boot (field 22 of /proc/self/stat).
std::optional<double> start_time_seconds() {
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  const auto comm_end = stat.rfind(')'); // the command name may hold spaces
  if (comm_end == std::string::npos) {
    return std::nullopt;
  }
  std::istringstream fields(stat.substr(comm_end + 2));
  std::string field;
  for (int i = 3; i < 22 && fields >> field; ++i) { // fields 3..21
  }
  double start_ticks = 0;
  if (!(fields >> start_ticks)) {
    return std::nullopt;
  }
  std::ifstream proc_stat("/proc/stat");
  for (std::string key; proc_stat >> key;) {
    if (key == "btime") {
      double boot = 0;
      proc_stat >> boot;
      return boot + start_ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
    }
    proc_stat.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return std::nullopt;
}

} // namespace

void add_process_metrics(MetricsRegistry& metrics) {
  metrics.describe("process_resident_memory_bytes", "gauge", "Resident memory size in bytes");
  metrics.describe("process_open_fds", "gauge", "Number of open file descriptors");
  metrics.describe("process_max_fds", "gauge", "Maximum number of open file descriptors");
  metrics.describe("process_cpu_seconds_total", "counter",
                   "Total user and system CPU time spent in seconds");
  metrics.describe("process_start_time_seconds", "gauge",
                   "Start time of the process since unix epoch in seconds");
  // The start never changes: read once.
  const std::optional<double> started = start_time_seconds();
  metrics.add_collector([started](std::vector<MetricsRegistry::Sample>& out) {
    const auto add = [&out](const char* name, std::optional<double> value) {
      if (value) {
        out.push_back({name, {}, *value});
      }
    };
    add("process_resident_memory_bytes", resident_bytes());
    add("process_open_fds", open_fds());
    add("process_max_fds", max_fds());
    add("process_cpu_seconds_total", cpu_seconds());
    add("process_start_time_seconds", started);
  });
}

void add_build_info(MetricsRegistry& metrics) {
  metrics.describe("kcache_build_info", "gauge",
                   "Always 1: the version, git revision, key schema and C ABI this kcached was "
                   "built with");
  const protocol::BuildInfo build = protocol::build_info();
  const MetricsRegistry::Labels labels = {{"version", std::string(build.version)},
                                          {"git_revision", std::string(build.git_revision)},
                                          {"key_schema", std::to_string(build.key_schema)},
                                          {"c_abi", std::to_string(build.c_abi)}};
  metrics.add_collector([labels](std::vector<MetricsRegistry::Sample>& out) {
    out.push_back({"kcache_build_info", labels, 1});
  });
}

} // namespace kcache::service
