/* TLS 1.3 external-PSK sessions through a libssl loaded at run time. Only the handful of entry
 * points below are used; the constants are OpenSSL 3's ABI values (tests/unit/test_tls.c checks
 * them against <openssl/ssl.h> when the header is installed). */
#include "util/tls.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/socket.h"

#define TLS_CTRL_MODE 33
#define TLS_CTRL_SET_MIN_PROTO 123
#define TLS_CTRL_SET_MAX_PROTO 124
#define TLS_CTRL_SET_READ_AHEAD 41
#define TLS_1_3 0x0304
#define TLS_MODE_PARTIAL_WRITE 0x1u
#define TLS_MODE_MOVING_BUFFER 0x2u
#define TLS_ERR_SSL 1
#define TLS_ERR_WANT_READ 2
#define TLS_ERR_WANT_WRITE 3
#define TLS_ERR_SYSCALL 5
#define TLS_ERR_ZERO_RETURN 6

/* Both sides name the key the same way; the name is not a secret. */
static const unsigned char psk_identity[] = "weft-psk-v1";
/* TLS_AES_128_GCM_SHA256: fast with AES-NI, and its SHA-256 matches the 32-byte key. */
static const unsigned char aes128gcm_id[2] = {0x13, 0x01};

typedef void* (*method_fn)(void);
typedef int (*psk_use_cb)(void* ssl, const void* md, const unsigned char** id, size_t* idlen, void** sess);
typedef int (*psk_find_cb)(void* ssl, const unsigned char* id, size_t idlen, void** sess);

static struct {
  method_fn client_method, server_method;
  void* (*ctx_new)(void* method);
  long (*ctx_ctrl)(void* ctx, int cmd, long larg, void* parg);
  int (*ctx_set_ciphersuites)(void* ctx, const char* list);
  int (*ctx_set_num_tickets)(void* ctx, size_t n);
  void (*ctx_set_read_buffer_len)(void* ctx, size_t len);
  void (*ctx_set_psk_use)(void* ctx, psk_use_cb cb);
  void (*ctx_set_psk_find)(void* ctx, psk_find_cb cb);
  void* (*ssl_new)(void* ctx);
  void (*ssl_free)(void* ssl);
  int (*set_fd)(void* ssl, int fd);
  void (*set_connect_state)(void* ssl);
  void (*set_accept_state)(void* ssl);
  int (*set_ex_data)(void* ssl, int idx, void* data);
  void* (*get_ex_data)(const void* ssl, int idx);
  int (*read)(void* ssl, void* buf, int num);
  int (*write)(void* ssl, const void* buf, int num);
  int (*get_error)(const void* ssl, int ret);
  const void* (*cipher_find)(void* ssl, const unsigned char* id);
  void* (*session_new)(void);
  void (*session_free)(void* sess);
  int (*session_set_key)(void* sess, const unsigned char* key, size_t len);
  int (*session_set_cipher)(void* sess, const void* cipher);
  int (*session_set_version)(void* sess, int version);
  unsigned long (*err_get)(void);
  void (*err_string)(unsigned long e, char* buf, size_t len);
  void* client_ctx;
  void* server_ctx;
  char why[160];
  int ok;
} lib;

struct weft_tls {
  void* ssl;
  uint8_t key[WEFT_TLS_KEY_BYTES];
  char peer[WEFT_SOCKET_ADDR_STRLEN + 16];
  int warned;
};

static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static int resolve(void* h, const char* name, void* slot) {
  void* f = dlsym(h, name);
  if (f == NULL) {
    snprintf(lib.why, sizeof(lib.why), "libssl lacks %s (OpenSSL 3 is needed)", name);
    return -1;
  }
  memcpy(slot, &f, sizeof(f));
  return 0;
}

static int resolve_all(void* ssl, void* crypto) {
  struct {
    void* h;
    const char* name;
    void* slot;
  } syms[] = {
      {ssl, "TLS_client_method", &lib.client_method},
      {ssl, "TLS_server_method", &lib.server_method},
      {ssl, "SSL_CTX_new", &lib.ctx_new},
      {ssl, "SSL_CTX_ctrl", &lib.ctx_ctrl},
      {ssl, "SSL_CTX_set_ciphersuites", &lib.ctx_set_ciphersuites},
      {ssl, "SSL_CTX_set_num_tickets", &lib.ctx_set_num_tickets},
      {ssl, "SSL_CTX_set_default_read_buffer_len", &lib.ctx_set_read_buffer_len},
      {ssl, "SSL_CTX_set_psk_use_session_callback", &lib.ctx_set_psk_use},
      {ssl, "SSL_CTX_set_psk_find_session_callback", &lib.ctx_set_psk_find},
      {ssl, "SSL_new", &lib.ssl_new},
      {ssl, "SSL_free", &lib.ssl_free},
      {ssl, "SSL_set_fd", &lib.set_fd},
      {ssl, "SSL_set_connect_state", &lib.set_connect_state},
      {ssl, "SSL_set_accept_state", &lib.set_accept_state},
      {ssl, "SSL_set_ex_data", &lib.set_ex_data},
      {ssl, "SSL_get_ex_data", &lib.get_ex_data},
      {ssl, "SSL_read", &lib.read},
      {ssl, "SSL_write", &lib.write},
      {ssl, "SSL_get_error", &lib.get_error},
      {ssl, "SSL_CIPHER_find", &lib.cipher_find},
      {ssl, "SSL_SESSION_new", &lib.session_new},
      {ssl, "SSL_SESSION_free", &lib.session_free},
      {ssl, "SSL_SESSION_set1_master_key", &lib.session_set_key},
      {ssl, "SSL_SESSION_set_cipher", &lib.session_set_cipher},
      {ssl, "SSL_SESSION_set_protocol_version", &lib.session_set_version},
      {crypto, "ERR_get_error", &lib.err_get},
      {crypto, "ERR_error_string_n", &lib.err_string},
  };
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++)
    if (resolve(syms[i].h, syms[i].name, syms[i].slot) != 0) return -1;
  return 0;
}

/* The session both callbacks hand OpenSSL: the key as TLS 1.3's external PSK. */
static void* psk_session(void* ssl) {
  struct weft_tls* t = lib.get_ex_data(ssl, 0);
  const void* cipher = lib.cipher_find(ssl, aes128gcm_id);
  void* sess = lib.session_new();
  if (t == NULL || cipher == NULL || sess == NULL) goto fail;
  if (!lib.session_set_key(sess, t->key, sizeof(t->key)) || !lib.session_set_cipher(sess, cipher) ||
      !lib.session_set_version(sess, TLS_1_3))
    goto fail;
  return sess;
fail:
  if (sess) lib.session_free(sess);
  return NULL;
}

static int on_psk_use(void* ssl, const void* md, const unsigned char** id, size_t* idlen, void** sess) {
  (void)md; /* NULL on the first call; our one cipher's hash is SHA-256 either way */
  *sess = psk_session(ssl);
  *id = psk_identity;
  *idlen = sizeof(psk_identity) - 1;
  return *sess != NULL;
}

static int on_psk_find(void* ssl, const unsigned char* id, size_t idlen, void** sess) {
  /* An unknown identity gets no session: the handshake then fails (we have no certificate). */
  int known = idlen == sizeof(psk_identity) - 1 && memcmp(id, psk_identity, idlen) == 0;
  *sess = known ? psk_session(ssl) : NULL;
  return 1;
}

static void* make_ctx(method_fn method, int is_server) {
  void* ctx = lib.ctx_new(method());
  if (ctx == NULL) return NULL;
  lib.ctx_ctrl(ctx, TLS_CTRL_SET_MIN_PROTO, TLS_1_3, NULL);
  lib.ctx_ctrl(ctx, TLS_CTRL_SET_MAX_PROTO, TLS_1_3, NULL);
  /* Partial writes let a full socket take part of a buffer, as plain sends do. */
  lib.ctx_ctrl(ctx, TLS_CTRL_MODE, TLS_MODE_PARTIAL_WRITE | TLS_MODE_MOVING_BUFFER, NULL);
  lib.ctx_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256");
  /* Read ahead into a large buffer: one read() brings several records instead of two reads per
   * 16 KiB record. Safe with our callers: they poll only after a read that would block, and then
   * OpenSSL holds no whole record. */
  lib.ctx_ctrl(ctx, TLS_CTRL_SET_READ_AHEAD, 1, NULL);
  lib.ctx_set_read_buffer_len(ctx, 256 * 1024);
  if (is_server) {
    lib.ctx_set_num_tickets(ctx, 0); /* no resumption: every connection proves the key afresh */
    lib.ctx_set_psk_find(ctx, on_psk_find);
  } else {
    lib.ctx_set_psk_use(ctx, on_psk_use);
  }
  return ctx;
}

static void load(void) {
  void* ssl = dlopen("libssl.so.3", RTLD_NOW | RTLD_LOCAL);
  void* crypto = ssl ? dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL) : NULL;
  if (ssl == NULL || crypto == NULL) {
    snprintf(lib.why, sizeof(lib.why), "%s (install OpenSSL 3, e.g. Debian's libssl3)", dlerror());
    return;
  }
  if (resolve_all(ssl, crypto) != 0) return;
  lib.client_ctx = make_ctx(lib.client_method, 0);
  lib.server_ctx = make_ctx(lib.server_method, 1);
  if (lib.client_ctx == NULL || lib.server_ctx == NULL) {
    snprintf(lib.why, sizeof(lib.why), "SSL_CTX_new failed");
    return;
  }
  lib.ok = 1;
}

int weft_tls_available(char* why, size_t len) {
  pthread_once(&load_once, load);
  if (!lib.ok && why != NULL) snprintf(why, len, "%s", lib.why);
  return lib.ok;
}

struct weft_tls* weft_tls_new(int fd, int is_server, const uint8_t key[WEFT_TLS_KEY_BYTES],
                              const char* peer) {
  char why[160];
  if (!weft_tls_available(why, sizeof(why))) {
    WEFT_WARN("TLS: encryption is on but OpenSSL is not usable: %s", why);
    return NULL;
  }
  struct weft_tls* t = calloc(1, sizeof(*t));
  if (t == NULL) return NULL;
  memcpy(t->key, key, sizeof(t->key));
  snprintf(t->peer, sizeof(t->peer), "%s", peer ? peer : "peer");
  t->ssl = lib.ssl_new(is_server ? lib.server_ctx : lib.client_ctx);
  if (t->ssl == NULL || !lib.set_fd(t->ssl, fd) || !lib.set_ex_data(t->ssl, 0, t)) {
    WEFT_WARN("TLS: could not set up a session with %s", t->peer);
    weft_tls_free(t);
    return NULL;
  }
  if (is_server)
    lib.set_accept_state(t->ssl);
  else
    lib.set_connect_state(t->ssl);
  return t;
}

/* Map one SSL_read/SSL_write result onto the socket layer's convention. */
static ssize_t io_result(struct weft_tls* t, int ret, int saved_errno) {
  if (ret > 0) return ret;
  int e = lib.get_error(t->ssl, ret);
  if (e == TLS_ERR_WANT_READ || e == TLS_ERR_WANT_WRITE) return 0;
  if (e == TLS_ERR_ZERO_RETURN || (e == TLS_ERR_SYSCALL && saved_errno == 0)) return WEFT_SOCKET_CLOSED;
  if (e == TLS_ERR_SYSCALL) {
    errno = saved_errno;
    return WEFT_SOCKET_ERROR;
  }
  char detail[256] = "";
  unsigned long code = lib.err_get();
  if (code) lib.err_string(code, detail, sizeof(detail));
  if (!t->warned++)
    WEFT_WARN("TLS: session with %s failed (do all ranks use the same pre-shared key?): %s", t->peer,
              detail[0] ? detail : "protocol error");
  errno = EPROTO;
  return WEFT_SOCKET_ERROR;
}

/* One TLS record carries at most 16 KiB; int-sized calls are enough for any caller's slice. */
static int clamp(size_t len) { return len > (1u << 30) ? (1 << 30) : (int)len; }

/* OpenSSL writes with write(2), which raises SIGPIPE when the peer has closed, and that kills the
 * program by default: a library must not. Around each call SIGPIPE is blocked in this thread,
 * and one the call raised is taken back before the mask is restored (one already pending from
 * elsewhere is left alone). */
struct pipe_guard {
  sigset_t old;
  int was_pending;
};

static void pipe_guard_on(struct pipe_guard* g) {
  sigset_t pipe, pending;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  sigpending(&pending);
  g->was_pending = sigismember(&pending, SIGPIPE) == 1;
  pthread_sigmask(SIG_BLOCK, &pipe, &g->old);
}

static void pipe_guard_off(struct pipe_guard* g) {
  sigset_t pipe, pending;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  if (!g->was_pending && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
    struct timespec now = {0, 0};
    while (sigtimedwait(&pipe, NULL, &now) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

ssize_t weft_tls_send(struct weft_tls* t, const void* buf, size_t len) {
  if (len == 0) return 0;
  struct pipe_guard g;
  pipe_guard_on(&g);
  errno = 0;
  int ret = lib.write(t->ssl, buf, clamp(len));
  int saved = errno;
  pipe_guard_off(&g);
  return io_result(t, ret, saved);
}

ssize_t weft_tls_recv(struct weft_tls* t, void* buf, size_t len) {
  if (len == 0) return 0;
  struct pipe_guard g; /* reading may write too: handshake messages, alerts */
  pipe_guard_on(&g);
  errno = 0;
  int ret = lib.read(t->ssl, buf, clamp(len));
  int saved = errno;
  pipe_guard_off(&g);
  return io_result(t, ret, saved);
}

void weft_tls_free(struct weft_tls* t) {
  if (t == NULL) return;
  if (t->ssl) lib.ssl_free(t->ssl);
  memset(t->key, 0, sizeof(t->key));
  free(t);
}
