/* weftrun: the job secret. Every rank of a job gets the same fresh random WEFT_JOB_SECRET (unless
 * the user set one), from which the library derives the key that authenticates the bootstrap, so
 * nobody outside the job can join it through the NCCL_COMM_ID address. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "weftrun.h"

#define SECRET_BYTES 32

static int random_bytes(unsigned char* buf, size_t len) {
  if (getrandom(buf, len, 0) == (ssize_t)len) return 0;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, buf, len) : -1;
  if (fd >= 0) close(fd);
  return n == (ssize_t)len ? 0 : -1;
}

int weftrun_secret_export(void) {
  const char* user = getenv("WEFT_JOB_SECRET");
  if (user != NULL && user[0] != '\0') return 0;
  unsigned char raw[SECRET_BYTES];
  char hex[2 * SECRET_BYTES + 1];
  if (random_bytes(raw, sizeof(raw)) != 0) {
    fprintf(stderr, "weftrun: cannot read random bytes for the job secret: %s\n", strerror(errno));
    return -1;
  }
  for (int i = 0; i < SECRET_BYTES; i++) snprintf(hex + 2 * i, 3, "%02x", raw[i]);
  /* Local ranks inherit it; remote ranks get it with the other WEFT_* variables. */
  int rc = setenv("WEFT_JOB_SECRET", hex, 1);
  memset(raw, 0, sizeof(raw));
  memset(hex, 0, sizeof(hex));
  if (rc != 0) fprintf(stderr, "weftrun: cannot set WEFT_JOB_SECRET: %s\n", strerror(errno));
  return rc;
}
