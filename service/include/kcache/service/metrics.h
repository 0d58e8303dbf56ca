#pragma once
// Prometheus metrics for the daemon: counters and latency histograms, rendered
// in the text exposition format at /metrics. Updates are lock-free; a registry
// belongs to one server (no global state). Collectors add values that live
// elsewhere (store counters) at scrape time.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kcache::service {

class Counter {
public:
  void inc(std::uint64_t by = 1) { value_.fetch_add(by, std::memory_order_relaxed); }
  std::uint64_t value() const { return value_.load(std::memory_order_relaxed); }

private:
  std::atomic<std::uint64_t> value_{0};
};

class Histogram {
public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // Cumulative counts per bound, then +Inf; plus sum and count.
  std::vector<std::uint64_t> cumulative() const;
  double sum() const;
  std::uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  const std::vector<double>& bounds() const { return bounds_; }

private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> buckets_; // one per bound, plus +Inf
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> sum_micros_{0}; // sum in millionths, so it fits an atomic integer
};

// Latency buckets in seconds: 50 us .. 10 s.
std::vector<double> latency_buckets();

class MetricsRegistry {
public:
  using Labels = std::vector<std::pair<std::string, std::string>>;
  // A line "name{labels} value" produced at scrape time.
  struct Sample {
    std::string name;
    Labels labels;
    double value;
  };
  using Collector = std::function<void(std::vector<Sample>&)>;

  // Same name and labels -> same instrument. References stay valid.
  Counter& counter(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& histogram(const std::string& name, const std::string& help, const Labels& labels = {},
                       std::vector<double> bounds = latency_buckets());
  // For collected samples: declares the family's type and help text.
  void describe(const std::string& name, const std::string& type, const std::string& help);
  void add_collector(Collector collector);

  std::string render() const;

private:
  struct Family {
    std::string type;
    std::string help;
    std::map<std::string, std::unique_ptr<Counter>> counters;     // by rendered labels
    std::map<std::string, std::unique_ptr<Histogram>> histograms; // by rendered labels
  };
  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
  std::vector<Collector> collectors_;
};

std::string render_labels(const MetricsRegistry::Labels& labels);

// Prometheus' standard process metrics, read at scrape time
// (process_metrics.cpp): process_resident_memory_bytes, process_open_fds,
// process_max_fds, process_cpu_seconds_total, process_start_time_seconds.
void add_process_metrics(MetricsRegistry& metrics);
// kcache_build_info{version, git_revision, key_schema, c_abi} 1.
void add_build_info(MetricsRegistry& metrics);

} // namespace kcache::service
