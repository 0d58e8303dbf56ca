#pragma once
// Which nodes may run a cluster job (issue 15). A job's capability names the
// Redis streams it waits in; a node reads only the streams of the
// capabilities it advertises, so a job runs only where it can.
//   compile job      <backend>/<target class>: "cuda" for GPU code (cubin,
//                    ptx: NVRTC and nvJitLink build any sm_XX without a GPU,
//                    so one stream per sm_XX would only split the queue), the
//                    CPU architecture for native code ("x86_64": the compile
//                    key names the submitting node's toolchain, which builds
//                    for its own architecture)
//   autotune search  autotune/<backend>/<tuning class>: its timings hold on
//                    that hardware only
// A capability is a Redis hash tag and one item of a comma-separated registry
// field: '{', '}', ',' and '%' in a part are percent-escaped, never dropped,
// so two different classes never share a stream.

#include <kcache/compiler/compile_spec.h>
#include <kcache/service/job.h>

#include <string>
#include <string_view>
#include <vector>

namespace kcache::service {

std::string escape_capability_part(std::string_view part);

// "cuda" for GPU outputs (cubin, ptx), `cpu_arch` for native ones.
std::string target_class(std::string_view output, std::string_view cpu_arch);
std::string compile_capability(std::string_view backend, std::string_view output,
                               std::string_view cpu_arch);
std::string autotune_capability(std::string_view backend, std::string_view tuning_class);
// A compile job's target class is `cpu_arch` for native code: the submitting
// node's own (its toolchain keyed the job).
std::string job_capability(const Job& job, std::string_view cpu_arch);
// What a submission waits for when no live node advertises its capability.
std::string capability_wanted(const Job& job, std::string_view cpu_arch);

// The hardware a node serves: its CPU architecture and the tuning classes it
// benchmarks on (gpu "" without a GPU).
struct NodeHardware {
  std::string cpu_arch, cpu_tuning_class, gpu_tuning_class;
};
// Every capability a node with these backends serves, sorted, no duplicates.
std::vector<std::string> node_capabilities(const std::vector<compiler::Backend>& backends,
                                           const NodeHardware& hardware);

} // namespace kcache::service
