#include "util/psk.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "util/log.h"
#include "util/param.h"
#include "util/sha256.h"
#include "util/tls.h"

#define PSK_FILE_MAX 4096

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int set_by_api; /* ncclSetEncryption was called: WEFT_PSK_FILE no longer applies */
static int enabled;
static uint8_t current[WEFT_PSK_DIGEST_BYTES];

static ncclResult_t require_tls(void) {
  char why[160];
  if (weft_tls_available(why, sizeof(why))) return ncclSuccess;
  WEFT_WARN("Encryption: a pre-shared key was given but TLS is unavailable: %s", why);
  return ncclSystemError;
}

ncclResult_t weft_psk_set(const char* psk) {
  if (psk != NULL && require_tls() != ncclSuccess) return ncclSystemError;
  pthread_mutex_lock(&mu);
  set_by_api = 1;
  enabled = psk != NULL;
  if (psk != NULL)
    weft_sha256(psk, strlen(psk), current);
  else
    memset(current, 0, sizeof(current));
  pthread_mutex_unlock(&mu);
  return ncclSuccess;
}

/* The key is the file's bytes without trailing newlines. A file others can read is refused. */
static int read_psk_file(const char* path, uint8_t digest[WEFT_PSK_DIGEST_BYTES]) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) {
    WEFT_WARN("Encryption: WEFT_PSK_FILE=%s cannot be opened: %s", path, strerror(errno));
    return -1;
  }
  struct stat st;
  char buf[PSK_FILE_MAX + 1];
  size_t n = 0;
  int ok = fstat(fileno(f), &st) == 0 && (st.st_mode & 077) == 0;
  if (!ok)
    WEFT_WARN("Encryption: WEFT_PSK_FILE=%s is readable by others (mode %o); chmod 600 it", path,
              (unsigned)(st.st_mode & 0777));
  if (ok) n = fread(buf, 1, sizeof(buf), f);
  fclose(f);
  if (!ok) return -1;
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) n--;
  if (n == 0 || n > PSK_FILE_MAX) {
    WEFT_WARN("Encryption: WEFT_PSK_FILE=%s must hold 1 to %d bytes of key", path, PSK_FILE_MAX);
    return -1;
  }
  if (require_tls() != ncclSuccess) return -1;
  weft_sha256(buf, n, digest);
  memset(buf, 0, sizeof(buf));
  return 1;
}

/* WEFT_PSK_FILE is read once, at the first connection that asks; a failure stays a failure. */
static int from_file = -2; /* -2: not read yet; else read_psk_file's answer */

int weft_psk_digest(uint8_t digest[WEFT_PSK_DIGEST_BYTES]) {
  pthread_mutex_lock(&mu);
  if (!set_by_api && from_file == -2) {
    const char* path = weft_param_str("WEFT_PSK_FILE");
    from_file = path == NULL || path[0] == '\0' ? 0 : read_psk_file(path, current);
    enabled = from_file == 1;
  }
  int on = set_by_api || from_file >= 0 ? enabled : -1;
  memcpy(digest, current, WEFT_PSK_DIGEST_BYTES);
  pthread_mutex_unlock(&mu);
  return on;
}
