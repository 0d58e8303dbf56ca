#include <kcache/service/metrics.h>

#include <cmath>
#include <cstdio>

namespace kcache::service {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)),
      buckets_(std::make_unique<std::atomic<std::uint64_t>[]>(bounds_.size() + 1)) {}

void Histogram::observe(double value) {
  std::size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) {
    ++i;
  }
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_micros_.fetch_add(static_cast<std::uint64_t>(std::llround(std::max(0.0, value) * 1e6)),
                        std::memory_order_relaxed);
}

std::vector<std::uint64_t> Histogram::cumulative() const {
  std::vector<std::uint64_t> out(bounds_.size() + 1);
  std::uint64_t running = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    out[i] = running;
  }
  return out;
}

double Histogram::sum() const {
  return static_cast<double>(sum_micros_.load(std::memory_order_relaxed)) / 1e6;
}

std::vector<double> latency_buckets() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,    0.1,    0.25,    0.5,    1.0,   2.5,    5.0,   10.0};
}

std::string render_labels(const MetricsRegistry::Labels& labels) {
  if (labels.empty()) {
    return "";
  }
  std::string out = "{";
  for (std::size_t i = 0; i < labels.size(); ++i) {
    out += (i > 0 ? "," : "") + labels[i].first + "=\"";
    for (char c : labels[i].second) {
      if (c == '\\' || c == '"') {
        out += '\\';
        out += c;
      } else if (c == '\n') {
        out += "\\n";
      } else {
        out += c;
      }
    }
    out += '"';
  }
  return out + "}";
}

Counter& MetricsRegistry::counter(const std::string& name, const std::string& help,
                                  const Labels& labels) {
  std::lock_guard lock(mu_);
  Family& f = families_[name];
  f.type = "counter";
  f.help = help;
  auto& slot = f.counters[render_labels(labels)];
  if (!slot) {
    slot = std::make_unique<Counter>();
  }
  return *slot;
}

Histogram& MetricsRegistry::histogram(const std::string& name, const std::string& help,
                                      const Labels& labels, std::vector<double> bounds) {
  std::lock_guard lock(mu_);
  Family& f = families_[name];
  f.type = "histogram";
  f.help = help;
  auto& slot = f.histograms[render_labels(labels)];
  if (!slot) {
    slot = std::make_unique<Histogram>(std::move(bounds));
  }
  return *slot;
}

void MetricsRegistry::describe(const std::string& name, const std::string& type,
                               const std::string& help) {
  std::lock_guard lock(mu_);
  Family& f = families_[name];
  f.type = type;
  f.help = help;
}

void MetricsRegistry::add_collector(Collector collector) {
  std::lock_guard lock(mu_);
  collectors_.push_back(std::move(collector));
}

namespace {
std::string number(double v) {
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.15g", v); // a unix time keeps its seconds
  }
  return buf;
}

// Inserts le="..." into rendered labels.
std::string with_le(const std::string& labels, const std::string& le) {
  if (labels.empty()) {
    return "{le=\"" + le + "\"}";
  }
  return labels.substr(0, labels.size() - 1) + ",le=\"" + le + "\"}";
}
} // namespace

std::string MetricsRegistry::render() const {
  std::lock_guard lock(mu_);
  std::vector<Sample> collected;
  for (const Collector& c : collectors_) {
    c(collected);
  }
  std::string out;
  auto line = [&out](std::string_view name, std::string_view suffix, std::string_view labels,
                     std::string_view value) {
    out.append(name).append(suffix).append(labels).append(" ").append(value).append("\n");
  };
  for (const auto& [name, f] : families_) {
    out.append("# HELP ").append(name).append(" ").append(f.help).append("\n");
    out.append("# TYPE ").append(name).append(" ").append(f.type).append("\n");
    for (const auto& [labels, c] : f.counters) {
      line(name, "", labels, std::to_string(c->value()));
    }
    for (const auto& [labels, h] : f.histograms) {
      const auto cumulative = h->cumulative();
      for (std::size_t i = 0; i < h->bounds().size(); ++i) {
        line(name, "_bucket", with_le(labels, number(h->bounds()[i])),
             std::to_string(cumulative[i]));
      }
      line(name, "_bucket", with_le(labels, "+Inf"), std::to_string(cumulative.back()));
      line(name, "_sum", labels, number(h->sum()));
      line(name, "_count", labels, std::to_string(h->count()));
    }
    for (const Sample& s : collected) {
      if (s.name == name) {
        line(name, "", render_labels(s.labels), number(s.value));
      }
    }
  }
  return out;
}

} // namespace kcache::service
