/* Shared helpers for test programs. */
#include "check.h"

int test_failures;

int test_finish(const char* name) {
  if (test_failures) {
    printf("%s: %d check(s) failed\n", name, test_failures);
    return 1;
  }
  printf("%s: all checks passed\n", name);
  return 0;
}

void test_skip(const char* why) {
  printf("SKIP: %s\n", why);
  exit(77);
}

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

int test_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = 0};
  socklen_t len = sizeof(addr);
  int port = -1;
  if (fd >= 0 && bind(fd, (struct sockaddr*)&addr, sizeof(addr)) == 0 &&
      getsockname(fd, (struct sockaddr*)&addr, &len) == 0)
    port = ntohs(addr.sin_port);
  if (fd >= 0) close(fd);
  return port;
}
