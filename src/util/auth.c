/* Job keys, challenges and answers of the connection handshake (see auth.h). */
#include "util/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "util/log.h"
#include "util/param.h"
#include "util/sha256.h"

ncclResult_t weft_auth_random(void* buf, size_t len) {
  size_t got = 0;
  while (got < len) {
    ssize_t n = getrandom((char*)buf + got, len - got, 0);
    if (n > 0) {
      got += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  if (got == len) return ncclSuccess;
  /* Old kernels without getrandom. */
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, buf, len) : -1;
  if (fd >= 0) close(fd);
  if (n == (ssize_t)len) return ncclSuccess;
  WEFT_WARN("Cannot read %zu random bytes (getrandom and /dev/urandom failed): %s", len, strerror(errno));
  return ncclSystemError;
}

void weft_auth_public_key(struct weft_auth_key* out) {
  static const char text[] = "weft public bootstrap key: authenticates nothing";
  weft_sha256(text, sizeof(text) - 1, out->bytes);
}

int weft_auth_is_public(const struct weft_auth_key* key) {
  struct weft_auth_key pub;
  weft_auth_public_key(&pub);
  return weft_auth_equal(key->bytes, pub.bytes, sizeof(pub.bytes));
}

void weft_auth_job_key_from_env(struct weft_auth_key* out) {
  static atomic_int warned;
  const char* secret = weft_param_str("WEFT_JOB_SECRET");
  if (secret != NULL && secret[0] != '\0') {
    /* Domain-separated, so the key differs from a plain hash of the secret used elsewhere. */
    static const char domain[] = "weft job key from WEFT_JOB_SECRET";
    struct weft_sha256 s;
    weft_sha256_init(&s);
    weft_sha256_update(&s, domain, sizeof(domain));
    weft_sha256_update(&s, secret, strlen(secret));
    weft_sha256_final(&s, out->bytes);
    return;
  }
  if (atomic_exchange(&warned, 1) == 0)
    WEFT_WARN(
        "Bootstrap: NCCL_COMM_ID is set but WEFT_JOB_SECRET is not: the job is unauthenticated and "
        "anybody who reaches the root can join or disturb it. Give every rank the same "
        "WEFT_JOB_SECRET (weftrun does), or pass an id from ncclGetUniqueId instead");
  weft_auth_public_key(out);
}

void weft_auth_conn_key(const struct weft_auth_key* job, const void* psk, size_t psklen,
                        struct weft_auth_key* out) {
  if (psk == NULL || psklen == 0) {
    *out = *job;
    return;
  }
  struct weft_auth_key k;
  weft_hmac_sha256(psk, psklen, job->bytes, sizeof(job->bytes), k.bytes);
  *out = k;
}

void weft_auth_mac(const struct weft_auth_key* key, const char* label,
                   const uint8_t nonce[WEFT_AUTH_NONCE_BYTES], const void* ctx, size_t ctxlen,
                   uint8_t mac[WEFT_AUTH_MAC_BYTES]) {
  struct weft_hmac h;
  weft_hmac_init(&h, key->bytes, sizeof(key->bytes));
  /* The terminating NUL keeps label and nonce apart. */
  weft_hmac_update(&h, label, strlen(label) + 1);
  weft_hmac_update(&h, nonce, WEFT_AUTH_NONCE_BYTES);
  if (ctxlen) weft_hmac_update(&h, ctx, ctxlen);
  weft_hmac_final(&h, mac);
}

int weft_auth_check(const struct weft_auth_key* key, const char* label,
                    const uint8_t nonce[WEFT_AUTH_NONCE_BYTES], const void* ctx, size_t ctxlen,
                    const uint8_t mac[WEFT_AUTH_MAC_BYTES]) {
  uint8_t want[WEFT_AUTH_MAC_BYTES];
  weft_auth_mac(key, label, nonce, ctx, ctxlen, want);
  int ok = weft_auth_equal(want, mac, sizeof(want));
  memset(want, 0, sizeof(want));
  return ok;
}

int weft_auth_equal(const void* a, const void* b, size_t len) {
  const volatile uint8_t* x = a;
  const volatile uint8_t* y = b;
  uint8_t diff = 0;
  for (size_t i = 0; i < len; i++) diff |= (uint8_t)(x[i] ^ y[i]);
  return diff == 0;
}
