// kcache_hwinfo: prints this host's hardware fingerprint, the binary and tuning
// classes kcache keys artifacts and autotune records with.
//
//   kcache_hwinfo [--json]
//
// Depends on nothing but the C++ standard library and libdl, so it builds
// anywhere (scripts/device/gpu_fingerprint.sh builds it on GPU hosts).

#include <kcache/cachekey/hardware.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

} // namespace

int main(int argc, char** argv) {
  const bool json = argc > 1 && std::strcmp(argv[1], "--json") == 0;
  using namespace kcache::cachekey;
  const CpuInfo cpu = detect_cpu();
  const HardwareClass cpu_class = hardware_class(cpu);
  const auto gpus = detect_gpus();
  if (!json) {
    std::printf("cpu   %s  (%s, %u threads)\n      binary class %s\n      tuning class %s\n",
                cpu.model.c_str(), cpu.vendor.c_str(), cpu.logical_cores,
                cpu_class.binary_class.c_str(), cpu_class.tuning_class.c_str());
    if (gpus.empty()) {
      std::printf("gpu   none (no CUDA driver or device)\n");
    }
    for (const GpuInfo& gpu : gpus) {
      const HardwareClass hc = hardware_class(gpu);
      std::printf("gpu%d  %s  (cc %d.%d, %d SMs, %.1f GiB)\n      binary class %s\n      tuning "
                  "class %s\n",
                  gpu.ordinal, gpu.name.c_str(), gpu.cc_major, gpu.cc_minor, gpu.sm_count,
                  static_cast<double>(gpu.memory_bytes) / (1ULL << 30), hc.binary_class.c_str(),
                  hc.tuning_class.c_str());
    }
    return 0;
  }
  std::string features;
  for (const std::string& f : cpu.features) {
    features += (features.empty() ? "" : ",") + json_string(f);
  }
  std::printf("{\"cpu\":{\"model\":%s,\"vendor\":%s,\"threads\":%u,\"features\":[%s],"
              "\"binary_class\":%s,\"tuning_class\":%s},\"gpus\":[",
              json_string(cpu.model).c_str(), json_string(cpu.vendor).c_str(), cpu.logical_cores,
              features.c_str(), json_string(cpu_class.binary_class).c_str(),
              json_string(cpu_class.tuning_class).c_str());
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const GpuInfo& g = gpus[i];
    const HardwareClass hc = hardware_class(g);
    std::printf("%s{\"ordinal\":%d,\"name\":%s,\"cc_major\":%d,\"cc_minor\":%d,\"sm_count\":%d,"
                "\"memory_bytes\":%llu,\"binary_class\":%s,\"tuning_class\":%s}",
                i > 0 ? "," : "", g.ordinal, json_string(g.name).c_str(), g.cc_major, g.cc_minor,
                g.sm_count, static_cast<unsigned long long>(g.memory_bytes),
                json_string(hc.binary_class).c_str(), json_string(hc.tuning_class).c_str());
  }
  std::printf("]}\n");
  return 0;
}
