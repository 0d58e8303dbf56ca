#include <kcache/service/job_capability.h>

#include <algorithm>
#include <cstdio>

namespace kcache::service {

namespace {

bool gpu_output(std::string_view output) {
  return output == "cubin" || output == "ptx";
}

// Which target classes and tuning classes a backend's outputs need
// (job_autotune.cpp admits CPU searches of cpp and llvm-ir, CUBIN searches
// of cuda and ptx).
bool builds_gpu_code(compiler::Backend b) {
  return b == compiler::Backend::kCuda || b == compiler::Backend::kPtx ||
         b == compiler::Backend::kLlvmIr;
}

bool builds_native_code(compiler::Backend b) {
  return b == compiler::Backend::kCpp || b == compiler::Backend::kLlvmIr;
}

} // namespace

std::string escape_capability_part(std::string_view part) {
  std::string out;
  out.reserve(part.size());
  for (const char c : part) {
    if (c == '{' || c == '}' || c == ',' || c == '%') {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", static_cast<unsigned char>(c));
      out += hex;
    } else {
      out += c;
    }
  }
  return out;
}

std::string target_class(std::string_view output, std::string_view cpu_arch) {
  return gpu_output(output) ? "cuda" : std::string(cpu_arch);
}

std::string compile_capability(std::string_view backend, std::string_view output,
                               std::string_view cpu_arch) {
  return escape_capability_part(backend) + "/" +
         escape_capability_part(target_class(output, cpu_arch));
}

std::string autotune_capability(std::string_view backend, std::string_view tuning_class) {
  return "autotune/" + escape_capability_part(backend) + "/" + escape_capability_part(tuning_class);
}

std::string job_capability(const Job& job, std::string_view cpu_arch) {
  return job.kind == JobKind::kAutotune ? autotune_capability(job.backend, job.tuning_class)
                                        : compile_capability(job.backend, job.output, cpu_arch);
}

std::string capability_wanted(const Job& job, std::string_view cpu_arch) {
  if (job.kind == JobKind::kAutotune) {
    return "a node of tuning class " + job.tuning_class + " (" + job.backend + " backend)";
  }
  return "a node with the " + job.backend + " backend for " + target_class(job.output, cpu_arch);
}

std::vector<std::string> node_capabilities(const std::vector<compiler::Backend>& backends,
                                           const NodeHardware& hardware) {
  std::vector<std::string> out;
  for (const compiler::Backend b : backends) {
    const std::string_view name = compiler::backend_name(b);
    if (builds_gpu_code(b)) {
      out.push_back(compile_capability(name, "cubin", hardware.cpu_arch));
      if (!hardware.gpu_tuning_class.empty() && b != compiler::Backend::kLlvmIr) {
        out.push_back(autotune_capability(name, hardware.gpu_tuning_class));
      }
    }
    if (builds_native_code(b)) {
      out.push_back(compile_capability(name, "object", hardware.cpu_arch));
      if (!hardware.cpu_tuning_class.empty()) {
        out.push_back(autotune_capability(name, hardware.cpu_tuning_class));
      }
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

} // namespace kcache::service
