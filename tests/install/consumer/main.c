/* Reads the C++ consumer's entry through the installed C ABI (libkcache.so).
 *   consumer_c URL KEY */
#include <kcache/kcache.h>

#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: consumer_c URL KEY\n");
    return 2;
  }
  kcache_options options;
  memset(&options, 0, sizeof options);
  options.url = argv[1];
  kcache_client* client = NULL;
  if (kcache_client_open(&options, &client) != KCACHE_OK) {
    fprintf(stderr, "open: %s\n", kcache_last_error());
    return 1;
  }
  kcache_buffer value;
  memset(&value, 0, sizeof value);
  const kcache_status status = kcache_get(client, argv[2], &value);
  const int ok = status == KCACHE_OK && value.size == strlen("from the C++ consumer") &&
                 memcmp(value.data, "from the C++ consumer", value.size) == 0;
  kcache_buffer_free(&value);
  kcache_client_close(client);
  if (!ok) {
    fprintf(stderr, "get: %s (%s)\n", kcache_status_name(status), kcache_last_error());
    return 1;
  }
  printf("C ABI %d: got %s\n", kcache_abi_version(), argv[2]);
  return 0;
}
