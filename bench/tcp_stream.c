/* Plain TCP stream between two hosts, the roof for the network benchmark: one connection,
 * 4 MiB writes for -t seconds; the receiver prints GB/s (1e9 B/s).
 *   tcp_stream -s PORT            receive (one connection), print the rate
 *   tcp_stream -c HOST PORT SECS  send */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUF (4 << 20)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  char* buf = calloc(1, BUF);
  if (argc == 3 && strcmp(argv[1], "-s") == 0) {
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
    if (bind(l, (struct sockaddr*)&a, sizeof(a)) || listen(l, 1)) return perror("listen"), 1;
    int fd = accept(l, NULL, NULL);
    double t0 = 0;
    long long total = 0;
    ssize_t n;
    while ((n = read(fd, buf, BUF)) > 0) {
      if (t0 == 0) t0 = now();
      total += n;
    }
    printf("%.3f\n", total / (now() - t0) / 1e9);
    return 0;
  }
  if (argc == 5 && strcmp(argv[1], "-c") == 0) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[3]))};
    inet_pton(AF_INET, argv[2], &a.sin_addr);
    for (int i = 0; connect(fd, (struct sockaddr*)&a, sizeof(a)) != 0; i++) {
      if (i > 50) return perror("connect"), 1;
      usleep(100000);
    }
    double end = now() + atof(argv[4]);
    while (now() < end)
      if (write(fd, buf, BUF) < 0) return perror("write"), 1;
    close(fd);
    return 0;
  }
  fprintf(stderr, "usage: tcp_stream -s PORT | -c HOST PORT SECS\n");
  return 2;
}
