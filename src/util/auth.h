/* Proof of job membership for every bootstrap and network connection: a 32-byte job key that
 * never goes on the wire, fresh random challenges, and HMAC-SHA256 answers compared in constant
 * time. Either the acceptor of a connection sends a challenge and the connector answers
 * HMAC(key, label || challenge || context), or (bootstrap messages) the sender signs over a
 * nonce the receiver published through an authenticated channel, with a sequence number that
 * refuses replays. */
#ifndef WEFT_UTIL_AUTH_H
#define WEFT_UTIL_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#define WEFT_AUTH_KEY_BYTES 32
#define WEFT_AUTH_NONCE_BYTES 32
#define WEFT_AUTH_MAC_BYTES 32
/* Seconds an accepted connection has to prove itself: an honest connector answers at once, so
 * this only bounds how long a silent stranger holds a descriptor. */
#define WEFT_AUTH_TIMEOUT_S 10

/* Labels keep an answer for one purpose from being accepted for another. */
#define WEFT_AUTH_LABEL_CHECKIN "weft-bootstrap-checkin"
#define WEFT_AUTH_LABEL_REPLY "weft-bootstrap-root-reply"
#define WEFT_AUTH_LABEL_PEER "weft-bootstrap-peer"
#define WEFT_AUTH_LABEL_MESSAGE "weft-bootstrap-message"
#define WEFT_AUTH_LABEL_NET "weft-net-socket"

struct weft_auth_key {
  uint8_t bytes[WEFT_AUTH_KEY_BYTES];
};

/* Bytes from getrandom (or /dev/urandom); ncclSystemError with a WARN if neither works. */
ncclResult_t weft_auth_random(void* buf, size_t len);

/* The job key of an NCCL_COMM_ID job: SHA-256 of WEFT_JOB_SECRET, or, when it is unset, the
 * public key after a WARN (once per process) that the job is unauthenticated. */
void weft_auth_job_key_from_env(struct weft_auth_key* out);
/* The key everybody knows: the protocol still runs, but it proves nothing. */
void weft_auth_public_key(struct weft_auth_key* out);
int weft_auth_is_public(const struct weft_auth_key* key);

/* The key connections prove: the job key itself, or HMAC(psk, job key) when a pre-shared key
 * is set (psk NULL or psklen 0: none), so only ranks that also hold the PSK get in. */
void weft_auth_conn_key(const struct weft_auth_key* job, const void* psk, size_t psklen,
                        struct weft_auth_key* out);

/* mac = HMAC(key, label || 0 || nonce || ctx). */
void weft_auth_mac(const struct weft_auth_key* key, const char* label,
                   const uint8_t nonce[WEFT_AUTH_NONCE_BYTES], const void* ctx, size_t ctxlen,
                   uint8_t mac[WEFT_AUTH_MAC_BYTES]);
/* Whether mac is the right answer, compared in constant time. */
int weft_auth_check(const struct weft_auth_key* key, const char* label,
                    const uint8_t nonce[WEFT_AUTH_NONCE_BYTES], const void* ctx, size_t ctxlen,
                    const uint8_t mac[WEFT_AUTH_MAC_BYTES]);
/* Constant-time comparison: 1 when equal. */
int weft_auth_equal(const void* a, const void* b, size_t len);

#endif
