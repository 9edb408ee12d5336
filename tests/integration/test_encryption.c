/* ncclSetEncryption: bad configs are refused with ncclInvalidArgument; two processes acting as
 * two hosts (sockets over loopback) with the same pre-shared key get a right all-reduce over TLS,
 * large enough to use the data sockets; a rank with a different key is refused at check-in. The
 * ranks are forked before the library starts any thread. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "nccl.h"

#define COUNT (3u << 20) /* 12 MiB of floats: split over the data sockets */

static ncclEncryptionConfig_t psk_config(const char* psk) {
  ncclEncryptionConfig_t c = NCCL_ENCRYPTION_CONFIG_INITIALIZER;
  c.mode = NCCL_ENCRYPTION_MODE_PSK;
  c.psk = psk;
  return c;
}

static void test_bad_configs(void) {
  EXPECT(ncclSetEncryption(NULL) == ncclInvalidArgument);
  ncclEncryptionConfig_t c = psk_config("secret");
  c.magic = 0x1234;
  EXPECT(ncclSetEncryption(&c) == ncclInvalidArgument);
  EXPECT(strstr(ncclGetLastError(NULL), "magic") != NULL);
  c = psk_config("secret");
  c.size = 8;
  EXPECT(ncclSetEncryption(&c) == ncclInvalidArgument);
  c = psk_config("secret");
  c.mode = 7;
  EXPECT(ncclSetEncryption(&c) == ncclInvalidArgument);
  EXPECT(strstr(ncclGetLastError(NULL), "mode 7") != NULL);
  c = psk_config(NULL);
  EXPECT(ncclSetEncryption(&c) == ncclInvalidArgument);
  c = psk_config("");
  EXPECT(ncclSetEncryption(&c) == ncclInvalidArgument);
  ncclEncryptionConfig_t off = NCCL_ENCRYPTION_CONFIG_INITIALIZER;
  EXPECT(ncclSetEncryption(&off) == ncclSuccess);
}

/* One rank: its own host identity, the given key, an all-reduce checked against the sum.
 * Exit status 0 right, 1 wrong, 2 init refused. */
static int rank_main(int rank, const char* psk, const char* port) {
  char host[16], comm_id[64];
  snprintf(host, sizeof(host), "tlshost%d", rank);
  snprintf(comm_id, sizeof(comm_id), "127.0.0.1:%s", port);
  setenv("WEFT_HOSTID", host, 1);
  setenv("NCCL_COMM_ID", comm_id, 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("NCCL_SOCKET_NTHREADS", "2", 1);
  setenv("WEFT_BOOTSTRAP_TIMEOUT", "8", 1);
  ncclEncryptionConfig_t c = psk_config(psk);
  if (ncclSetEncryption(&c) != ncclSuccess) return 3;
  ncclUniqueId id;
  ncclComm_t comm;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 3;
  ncclResult_t res = ncclCommInitRank(&comm, 2, id, rank);
  if (res != ncclSuccess) {
    fprintf(stderr, "rank %d: init refused (%s): %s\n", rank, ncclGetErrorString(res),
            ncclGetLastError(NULL));
    return 2;
  }
  float* buf = malloc(COUNT * sizeof(float));
  for (size_t i = 0; i < COUNT; i++) buf[i] = (float)((i % 1000) + rank);
  int wrong = ncclAllReduce(buf, buf, COUNT, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess;
  for (size_t i = 0; i < COUNT && !wrong; i++) wrong = buf[i] != (float)(2 * (i % 1000) + 1);
  free(buf);
  ncclCommDestroy(comm);
  return wrong;
}

/* A port the kernel just handed out, for the job's NCCL_COMM_ID. */
static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  int port = 0;
  if (fd >= 0 && bind(fd, (struct sockaddr*)&a, sizeof(a)) == 0 &&
      getsockname(fd, (struct sockaddr*)&a, &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

static void run_pair(const char* psk0, const char* psk1, int want0, int want1) {
  char port[16];
  snprintf(port, sizeof(port), "%d", free_port());
  pid_t pids[2];
  const char* psks[2] = {psk0, psk1};
  for (int r = 0; r < 2; r++) {
    pids[r] = fork();
    if (pids[r] == 0) _exit(rank_main(r, psks[r], port));
  }
  for (int r = 0; r < 2; r++) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    EXPECT_MSG(want0 < 0 || rc == (r == 0 ? want0 : want1), "rank %d exited %d, want %d", r, rc,
               r == 0 ? want0 : want1);
    if (want0 < 0) EXPECT_MSG(rc != 0, "rank %d exited 0 though its peer's key differs", r);
  }
}

int main(void) {
  /* Forks first: the children start the library's threads, the parent only checks configs. */
  run_pair("the same key", "the same key", 0, 0);
  /* Rank 1 is refused at check-in; rank 0 then gives up waiting for it. */
  run_pair("key A", "key B", -1, -1);
  test_bad_configs();
  return test_finish("test_encryption");
}
