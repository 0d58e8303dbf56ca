// A stand-in worker that dies the way a compiler bug would: it reads the
// request like kcache-worker, then takes a SIGSEGV. Tests WorkerRunner's
// handling of crashes without needing a compiler that crashes on demand.
//
// A request that mentions KCACHE_TEST_PTXAS_OOM gets what NVRTC does when
// ptxas runs out of address space: "Memory allocation failure" on stderr and
// an ordinary compile-failed reply whose log ends in a stray NUL.
//
// `--bench` reads one request and answers for a variant "v" with its
// address-space limit as the error; a request mentioning kcache-test-exit3
// gets one answer and the exit of a GPU worker whose context broke ("RLIMIT_AS unlimited" or
// "RLIMIT_AS <bytes>"), so tests can see which limits a bench worker runs under.

#include <sys/resource.h>

#include <csignal>
#include <cstdint>
#include <iostream>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) {
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }
}

// The worker protocol's parts body (protocol/wire.h), by hand: this binary
// links nothing of kcache, so that it stays uninstrumented.
std::string parts(const std::vector<std::pair<std::string, std::string>>& named) {
  std::string out = "KCP1";
  put_le(out, named.size(), 4);
  for (const auto& [name, data] : named) {
    put_le(out, name.size(), 4);
    out += name;
    put_le(out, data.size(), 8);
    out += data;
  }
  return out;
}

} // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string_view(argv[1]) == "--toolchains") {
    // Enough to be taken on by kcached, which then sees every compile crash.
    std::cout << R"({"cpp":{"clang":"crashing"}})"
              << "\n";
    return 0;
  }
  if (argc == 2 && std::string_view(argv[1]) == "--bench") {
    // One framed request ("<length>\n<body>"), answered for variant "v".
    std::string length;
    std::getline(std::cin, length);
    std::string body(std::stoull(length), '\0');
    std::cin.read(body.data(), static_cast<std::streamsize>(body.size()));
    if (body.find("kcache-test-exit3") != std::string::npos) {
      // As a GPU worker after a launch that broke its context: it answers
      // its first variant ("a", or "b" when "a" is not asked for), then
      // exits 3 (kBenchRestartExit) with the rest unanswered.
      const std::string id = body.find(R"("id":"a")") != std::string::npos ? "a" : "b";
      std::cout << R"({"id":")" << id << R"(","status":"ok","median_us":1,"min_us":1})"
                << std::endl;
      return 3;
    }
    rlimit as{};
    ::getrlimit(RLIMIT_AS, &as);
    std::cout << R"({"id":"v","status":"error","error":"RLIMIT_AS )"
              << (as.rlim_cur == RLIM_INFINITY ? std::string("unlimited")
                                               : std::to_string(as.rlim_cur))
              << "\"}" << std::endl;
    return 0;
  }
  const std::string request((std::istreambuf_iterator<char>(std::cin)),
                            std::istreambuf_iterator<char>());
  if (request.find("KCACHE_TEST_PTXAS_OOM") != std::string::npos) {
    std::cerr << "ptxas fatal   : Memory allocation failure\n";
    using namespace std::string_literals;
    std::cout << parts(
        {{"outcome", R"j({"ok":false,"code":"compile-failed",)j"
                     R"j("message":"NVRTC compile failed: NVRTC_ERROR_COMPILATION",)j"
                     R"j("toolchain":{"clang":"crashing"}})j"},
         {"binary", ""},
         {"log", "Ptx assembly aborted due to errors\n\0"s}});
    return 0;
  }
  std::cerr << "crashing_worker: read " << request.size() << " bytes, now faulting\n";
  std::raise(SIGSEGV);
  return 0;
}
