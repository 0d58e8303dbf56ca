// A stand-in worker that dies the way a compiler bug would: it reads the
// request like kcache-worker, then takes a SIGSEGV. Tests WorkerRunner's
// handling of crashes without needing a compiler that crashes on demand.

#include <csignal>
#include <iostream>
#include <iterator>
#include <string_view>

int main(int argc, char** argv) {
  if (argc == 2 && std::string_view(argv[1]) == "--toolchains") {
    // Enough to be taken on by kcached, which then sees every compile crash.
    std::cout << R"({"cpp":{"clang":"crashing"}})"
              << "\n";
    return 0;
  }
  const std::string request((std::istreambuf_iterator<char>(std::cin)),
                            std::istreambuf_iterator<char>());
  std::cerr << "crashing_worker: read " << request.size() << " bytes, now faulting\n";
  std::raise(SIGSEGV);
  return 0;
}
