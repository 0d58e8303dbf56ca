// Puts an entry through the installed C++ client and reads it back.
//   consumer_cpp URL KEY
#include <kcache/client/client.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: consumer_cpp URL KEY\n");
    return 2;
  }
  kcache::client::ClientOptions options;
  options.url = argv[1];
  auto client = kcache::client::Client::create(options);
  if (!client) {
    std::fprintf(stderr, "create: %s\n", client.error().message.c_str());
    return 1;
  }
  if (auto put = (*client)->put(argv[2], {{"value", "from the C++ consumer"}}); !put) {
    std::fprintf(stderr, "put: %s\n", put.error().message.c_str());
    return 1;
  }
  auto got = (*client)->get(argv[2]);
  if (!got || !got->has_value() || (*got)->files.at(0).data != "from the C++ consumer") {
    std::fprintf(stderr, "get: not the bytes put\n");
    return 1;
  }
  std::printf("c++ client: put and got %s\n", argv[2]);
  return 0;
}
