/* SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), so the library authenticates its connections
 * without depending on OpenSSL. Not constant-time in the message length (lengths are public). */
#ifndef WEFT_UTIL_SHA256_H
#define WEFT_UTIL_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define WEFT_SHA256_BYTES 32
#define WEFT_SHA256_BLOCK 64

struct weft_sha256 {
  uint32_t h[8];
  uint64_t total; /* bytes hashed so far */
  uint8_t buf[WEFT_SHA256_BLOCK];
  size_t used; /* bytes waiting in buf */
};

void weft_sha256_init(struct weft_sha256* s);
void weft_sha256_update(struct weft_sha256* s, const void* data, size_t len);
void weft_sha256_final(struct weft_sha256* s, uint8_t out[WEFT_SHA256_BYTES]);
void weft_sha256(const void* data, size_t len, uint8_t out[WEFT_SHA256_BYTES]);
/* 1 when blocks go through the CPU's SHA instructions. weft_sha256_use_portable(1) makes the
 * process use the portable code from now on (tests compare the two). */
int weft_sha256_hardware(void);
void weft_sha256_use_portable(int on);

/* HMAC-SHA256 in steps, so callers MAC several fields without copying them into one buffer. */
struct weft_hmac {
  struct weft_sha256 inner;
  uint8_t okey[WEFT_SHA256_BLOCK];
};
void weft_hmac_init(struct weft_hmac* h, const void* key, size_t keylen);
void weft_hmac_update(struct weft_hmac* h, const void* data, size_t len);
void weft_hmac_final(struct weft_hmac* h, uint8_t out[WEFT_SHA256_BYTES]);
void weft_hmac_sha256(const void* key, size_t keylen, const void* data, size_t len,
                      uint8_t out[WEFT_SHA256_BYTES]);

#endif
