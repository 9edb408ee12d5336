/* TLS 1.3 PSK sessions (src/util/tls.c) over a socket pair: data arrives intact and in order,
 * the wire never carries the plaintext, a different key or a flipped ciphertext byte fails with
 * EPROTO instead of delivering bytes, and our copies of OpenSSL's constants match its header. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "util/socket.h"
#include "util/tls.h"

#if __has_include(<openssl/ssl.h>)
#include <openssl/ssl.h>
#define HAVE_SSL_HEADER 1
#endif

#define PAYLOAD (1 << 20)

static void nonblocking_pair(int fds[2]) {
  EXPECT(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  for (int i = 0; i < 2; i++) EXPECT(fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK) == 0);
}

static void fill_key(uint8_t key[WEFT_TLS_KEY_BYTES], uint8_t seed) {
  for (int i = 0; i < WEFT_TLS_KEY_BYTES; i++) key[i] = (uint8_t)(seed + 7 * i);
}

/* Drive a client sending len bytes and a server receiving them in one thread, until both are
 * done or one fails; returns the first error (0 on success) and how much arrived. */
static ssize_t pump(struct weft_tls* tx, struct weft_tls* rx, const char* src, char* dst, size_t len,
                    size_t* got) {
  size_t sent = 0;
  *got = 0;
  for (int spins = 0; *got < len && spins < 1000000; spins++) {
    if (sent < len) {
      ssize_t n = weft_tls_send(tx, src + sent, len - sent);
      if (n < 0) return n;
      sent += (size_t)n;
    }
    ssize_t n = weft_tls_recv(rx, dst + *got, len - *got);
    if (n < 0) return n;
    *got += (size_t)n;
  }
  return 0;
}

/* A client and a server sharing key seed over a fresh socket pair; 0 when either is missing. */
static int session_pair(uint8_t seed, int fds[2], struct weft_tls** client, struct weft_tls** server) {
  uint8_t key[WEFT_TLS_KEY_BYTES];
  nonblocking_pair(fds);
  fill_key(key, seed);
  *client = weft_tls_new(fds[0], 0, key, "server");
  *server = weft_tls_new(fds[1], 1, key, "client");
  EXPECT(*client != NULL && *server != NULL);
  return *client != NULL && *server != NULL;
}

static void test_roundtrip(void) {
  int fds[2];
  struct weft_tls *client, *server;
  if (!session_pair(1, fds, &client, &server)) return;
  char* src = malloc(PAYLOAD);
  char* dst = malloc(PAYLOAD);
  for (int i = 0; i < PAYLOAD; i++) src[i] = (char)(i * 31 + (i >> 9));
  size_t got;
  EXPECT(pump(client, server, src, dst, PAYLOAD, &got) == 0);
  EXPECT(got == PAYLOAD && memcmp(src, dst, PAYLOAD) == 0);
  /* And back: the server side can send too once the handshake is done. */
  EXPECT(pump(server, client, src, dst, 4096, &got) == 0 && memcmp(src, dst, 4096) == 0);
  weft_tls_free(client);
  weft_tls_free(server);
  close(fds[0]);
  close(fds[1]);
  free(src);
  free(dst);
}

static void test_wrong_key(void) {
  int fds[2];
  uint8_t ka[WEFT_TLS_KEY_BYTES], kb[WEFT_TLS_KEY_BYTES];
  nonblocking_pair(fds);
  fill_key(ka, 1);
  fill_key(kb, 2);
  struct weft_tls* client = weft_tls_new(fds[0], 0, ka, "server");
  struct weft_tls* server = weft_tls_new(fds[1], 1, kb, "client");
  char src[64] = "nothing of this may arrive", dst[64];
  size_t got;
  ssize_t r = pump(client, server, src, dst, sizeof(src), &got);
  EXPECT(r == WEFT_SOCKET_ERROR && errno == EPROTO);
  EXPECT(got == 0);
  weft_tls_free(client);
  weft_tls_free(server);
  close(fds[0]);
  close(fds[1]);
}

/* The client talks to a raw socket: what it writes must not contain the plaintext. The bytes are
 * then fed, one flipped, to a real server, which must reject them. */
static void test_ciphertext(void) {
  int wire[2], srv[2];
  uint8_t key[WEFT_TLS_KEY_BYTES];
  nonblocking_pair(wire);
  nonblocking_pair(srv);
  fill_key(key, 3);
  struct weft_tls* client = weft_tls_new(wire[0], 0, key, "raw");
  struct weft_tls* server = weft_tls_new(srv[1], 1, key, "client");
  const char secret[] = "PLAINTEXT-THAT-MUST-NOT-BE-SEEN-ON-THE-WIRE";
  char buf[65536], got[sizeof(secret)];
  size_t relayed_to_client = 0, have = 0;
  ssize_t n = 0;
  int sent = 0, flipped = 0;
  /* Relay the handshake both ways. The client's send returns bytes once its handshake is done;
   * the read right after it ends with the application record, whose tag gets one flipped bit. */
  for (int spins = 0; spins < 100000 && have < sizeof(secret); spins++) {
    if (!sent) {
      n = weft_tls_send(client, secret, sizeof(secret));
      EXPECT(n >= 0);
      sent = n > 0;
    }
    while ((n = read(wire[1], buf, sizeof(buf))) > 0) {
      EXPECT(memmem(buf, (size_t)n, "PLAINTEXT", 9) == NULL);
      if (sent && !flipped) {
        buf[n - 3] ^= 0x40;
        flipped = 1;
      }
      EXPECT(write(srv[0], buf, (size_t)n) == n);
    }
    while ((n = read(srv[0], buf, sizeof(buf))) > 0) {
      EXPECT(write(wire[1], buf, (size_t)n) == n);
      relayed_to_client += (size_t)n;
    }
    n = weft_tls_recv(server, got + have, sizeof(got) - have);
    if (n < 0) break;
    have += (size_t)n;
  }
  EXPECT(relayed_to_client > 0);
  EXPECT(flipped);
  EXPECT(n == WEFT_SOCKET_ERROR && errno == EPROTO);
  EXPECT(have == 0);
  weft_tls_free(client);
  weft_tls_free(server);
  for (int i = 0; i < 2; i++) close(wire[i]), close(srv[i]);
}

static void test_constants(void) {
#ifdef HAVE_SSL_HEADER
  /* tls.c keeps its own copies so the build needs no OpenSSL headers. */
  EXPECT(SSL_CTRL_MODE == 33 && SSL_CTRL_SET_MIN_PROTO_VERSION == 123 &&
         SSL_CTRL_SET_MAX_PROTO_VERSION == 124);
  EXPECT(TLS1_3_VERSION == 0x0304 && SSL_MODE_ENABLE_PARTIAL_WRITE == 1 &&
         SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER == 2);
  EXPECT(SSL_ERROR_SSL == 1 && SSL_ERROR_WANT_READ == 2 && SSL_ERROR_WANT_WRITE == 3);
  EXPECT(SSL_ERROR_SYSCALL == 5 && SSL_ERROR_ZERO_RETURN == 6);
  EXPECT(SSL_CTRL_SET_READ_AHEAD == 41);
#endif
}

/* A peer that closes its socket: the next send is an error, and the process survives it (OpenSSL
 * writes with write(2), whose SIGPIPE would otherwise end it). */
static void test_peer_closed(void) {
  int fds[2];
  struct weft_tls *client, *server;
  if (!session_pair(3, fds, &client, &server)) return;
  char src[4096] = "hello", dst[4096];
  size_t got;
  EXPECT(pump(client, server, src, dst, sizeof(src), &got) == 0);
  weft_tls_free(server);
  close(fds[1]);
  ssize_t n = 0;
  for (int i = 0; i < 100 && n >= 0; i++) n = weft_tls_send(client, src, sizeof(src));
  EXPECT_MSG(n < 0, "sends to a closed peer gave %zd", n);
  sigset_t pending;
  EXPECT(sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 0);
  weft_tls_free(client);
  close(fds[0]);
}

int main(void) {
  char why[160];
  if (!weft_tls_available(why, sizeof(why))) {
    printf("SKIP: TLS unavailable: %s\n", why);
    return 77;
  }
  test_constants();
  test_roundtrip();
  test_wrong_key();
  test_ciphertext();
  test_peer_closed();
  return test_finish("test_tls");
}
