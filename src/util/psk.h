/* The process's encryption setting: ncclSetEncryption's pre-shared key, or the key in the file
 * WEFT_PSK_FILE names when the program never called it. Communicators read it when they are
 * created: their bootstrap proves the key and their socket connections run TLS with it. */
#ifndef WEFT_UTIL_PSK_H
#define WEFT_UTIL_PSK_H

#include <stdint.h>

#include "nccl.h"

#define WEFT_PSK_DIGEST_BYTES 32

/* psk NULL turns encryption off. ncclSystemError (with a WARN) when TLS cannot be loaded. */
ncclResult_t weft_psk_set(const char* psk);

/* 1 and digest = SHA-256 of the key when encryption is on; 0 when off. -1 (after a WARN) when
 * WEFT_PSK_FILE names a file that cannot be used: the job must not silently run in clear. */
int weft_psk_digest(uint8_t digest[WEFT_PSK_DIGEST_BYTES]);

#endif
