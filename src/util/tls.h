/* TLS 1.3 with an external pre-shared key over a connected non-blocking socket, for the
 * encryption ncclSetEncryption asks for. OpenSSL (libssl.so.3) is loaded on first use, so the
 * library runs without it while encryption is off. */
#ifndef WEFT_UTIL_TLS_H
#define WEFT_UTIL_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define WEFT_TLS_KEY_BYTES 32

struct weft_tls;

/* 1 when libssl could be loaded; otherwise 0 and why (e.g. "libssl.so.3: cannot open ..."). */
int weft_tls_available(char* why, size_t len);

/* A session on fd (already connected, non-blocking): the connecting side is the client, the
 * accepting side the server. Both must pass the same key or the handshake fails. The handshake
 * runs inside the first send/recv calls. NULL (with a WARN) when TLS is unavailable. peer names
 * the other side in WARNs. */
struct weft_tls* weft_tls_new(int fd, int is_server, const uint8_t key[WEFT_TLS_KEY_BYTES], const char* peer);

/* Like weft_socket_try_send/recv: bytes moved, 0 when it would block (the handshake may be what
 * waits), WEFT_SOCKET_CLOSED when the peer closed, WEFT_SOCKET_ERROR with errno set otherwise
 * (EPROTO for a failed handshake or a record that does not authenticate). */
ssize_t weft_tls_send(struct weft_tls* t, const void* buf, size_t len);
ssize_t weft_tls_recv(struct weft_tls* t, void* buf, size_t len);

/* Frees the session; the socket stays open (its owner closes it). */
void weft_tls_free(struct weft_tls* t);

#endif
