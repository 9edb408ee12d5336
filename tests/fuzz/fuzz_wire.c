/* libFuzzer target over every message the bootstrap and the socket network read off the wire.
 * Byte 0 picks the parser, byte 1 bit 0 who speaks: a member of the job (the harness signs the
 * fuzzed body with the job key, so the checks behind the MAC are reached) or a stranger (raw
 * bytes, MAC included). The incoming-connection state machine of bootstrap/p2p.c and the ring
 * all-gather are driven for real through socketpairs, fed in fuzzer-chosen slices.
 * WEFT_FUZZ_SEEDS=dir writes a seed corpus of valid messages there at start-up. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/internal.h"
#include "transport/net_socket_wire.h"
#include "util/auth.h"

#define FUZZ_MAGIC 0x1122334455667788ULL

enum {
  P_CHECKIN,
  P_REPLY,
  P_INCOMING,
  P_ALLGATHER,
  P_ADDR,
  P_HELLO,
  P_MSGHDR,
  P_ADDRSTR,
  P_ROOTLINK,
  P_COUNT
};

/* Input cursor: reads past the end give zeros, so every input is a complete sequence. */
struct in {
  const uint8_t* p;
  size_t n;
};

static void take(struct in* in, void* out, size_t len) {
  size_t k = len < in->n ? len : in->n;
  memcpy(out, in->p, k);
  memset((char*)out + k, 0, len - k);
  in->p += k;
  in->n -= k;
}

static uint8_t byte(struct in* in) {
  uint8_t b;
  take(in, &b, 1);
  return b;
}

static struct weft_auth_key job_key;
static const uint8_t fixed_nonce[WEFT_AUTH_NONCE_BYTES] = {7, 7, 7};

/* The root: a series of check-ins (op byte + signed check-in) into one roster. */
static void fuzz_checkin(struct in* in, int member) {
  struct weft_bs_roster ros;
  memset(&ros, 0, sizeof(ros));
  while (in->n > 0) {
    uint8_t op = byte(in);
    struct weft_bs_signed_checkin m;
    take(in, &m, sizeof(m));
    if (member) weft_auth_mac(&job_key, WEFT_AUTH_LABEL_CHECKIN, fixed_nonce, &m.body, sizeof(m.body), m.mac);
    if (!weft_auth_check(&job_key, WEFT_AUTH_LABEL_CHECKIN, fixed_nonce, &m.body, sizeof(m.body), m.mac))
      continue;
    char why[160];
    if (!weft_bs_checkin_valid(&m.body, FUZZ_MAGIC, why, sizeof(why))) continue;
    if (ros.nranks == 0 && !weft_bs_roster_init(&ros, &m.body)) break;
    int slot;
    if (!weft_bs_roster_admit(&ros, &m.body, &slot, why, sizeof(why))) continue;
    if (slot < 0 || slot >= ros.nneeded) abort(); /* admitted outside the roster */
    ros.addrs[slot] = m.body.listen;
    ros.have[slot] = (op & 1) ? WEFT_BS_HAVE_LEFT : WEFT_BS_HAVE_PRESENT;
    ros.nhave += !(op & 1);
  }
  if (ros.nranks == 0) return;
  struct weft_bs_reply reply;
  weft_bs_roster_missing(&ros, &reply);
  char text[768];
  weft_bs_format_missing(&reply, text, sizeof(text));
  /* What the root pairs must pass the rank's own checks. */
  for (int s = 0; s < ros.nneeded; s++) {
    if (ros.have[s] != WEFT_BS_HAVE_PRESENT) continue;
    memset(&reply, 0, sizeof(reply));
    reply.kind = WEFT_BS_REPLY_NEXT;
    reply.next = ros.addrs[s];
    if (!weft_bs_reply_valid(&reply, ros.nranks, NULL, 0)) abort();
  }
  weft_bs_roster_fini(&ros);
}

/* A rank reads the root's reply: MAC, fields, and the text of the MISSING / GONE errors. */
static void fuzz_reply(struct in* in, int member) {
  int nranks = 1 + byte(in);
  size_t len = 1 + byte(in) * 3; /* buffers shorter and longer than any text */
  struct weft_bs_signed_reply r;
  take(in, &r, sizeof(r));
  if (member) weft_auth_mac(&job_key, WEFT_AUTH_LABEL_REPLY, fixed_nonce, &r.body, sizeof(r.body), r.mac);
  char* text = malloc(len);
  weft_bs_format_missing(&r.body, text, len); /* clamps whatever it gets */
  if (strnlen(text, len) == len) abort();
  if (weft_auth_check(&job_key, WEFT_AUTH_LABEL_REPLY, fixed_nonce, &r.body, sizeof(r.body), r.mac) &&
      weft_bs_reply_valid(&r.body, nranks, text, len) && r.body.kind == WEFT_BS_REPLY_NEXT) {
    char addr[WEFT_SOCKET_ADDR_STRLEN];
    weft_socket_addr_str(&r.body.next, addr, sizeof(addr));
  }
  free(text);
}

/* A bootstrap object of rank 1 in a job of nranks, not listening (the harness hands it fds). */
static struct weft_bootstrap* fake_bootstrap(int nranks) {
  struct weft_bootstrap* bs = calloc(1, sizeof(*bs));
  bs->rank = 1;
  bs->nranks = nranks;
  bs->magic = FUZZ_MAGIC;
  bs->key = job_key;
  bs->listen_fd = bs->next_fd = bs->prev_fd = bs->root.fd = -1;
  bs->maxconns = 2; /* kept incoming connections beyond it are shut for writing */
  bs->peers = calloc(nranks, sizeof(*bs->peers));
  bs->send_seq = calloc(nranks, sizeof(*bs->send_seq));
  bs->recv_seq = calloc(nranks, sizeof(*bs->recv_seq));
  return bs;
}

/* Write stream to the far end in fuzzer-chosen slices, letting inc[0] read after each. */
static void feed_slices(struct weft_bootstrap* bs, int far, struct in* in, const uint8_t* stream,
                        size_t len) {
  size_t off = 0;
  while (off < len) {
    size_t slice = 1 + byte(in) % 64;
    if (slice > len - off) slice = len - off;
    if (send(far, stream + off, slice, MSG_NOSIGNAL) != (ssize_t)slice) break;
    off += slice;
    if (bs->ninc > 0) weft_bs_incoming_read(bs, 0);
  }
}

/* The rest of the stream, then its end: the connection must end parked, handed over or dropped. */
static void feed_last(struct weft_bootstrap* bs, int far, struct in* in, const uint8_t* stream, size_t len) {
  feed_slices(bs, far, in, stream, len);
  shutdown(far, SHUT_WR);
  for (int i = 0; i < 64 && bs->ninc > 0; i++) weft_bs_incoming_read(bs, 0);
  if (bs->ninc > 0) abort();
}

/* Sign a message frame (opening + len - opening bytes) as its sender would: the digest covers
 * the payload bytes that are there (at most size), the MAC our nonce. */
static void sign_frame(struct weft_bootstrap* bs, uint8_t* frame, size_t len) {
  struct weft_bs_header h;
  memcpy(&h, frame + WEFT_AUTH_MAC_BYTES, sizeof(h));
  size_t open = sizeof(struct weft_bs_opening);
  size_t have = len - open < h.size ? len - open : (size_t)h.size;
  weft_sha256(frame + open, have, h.digest);
  memcpy(frame + WEFT_AUTH_MAC_BYTES, &h, sizeof(h));
  weft_auth_mac(&job_key, WEFT_AUTH_LABEL_MESSAGE, bs->nonce, &h, sizeof(h), frame);
}

/* A member's stream: messages signed as their sender signs them (the first, then up to 3 more
 * frames on the same kept connection, each header and payload from the input), or a ring opening
 * followed by the answer to the challenge it draws (if any). */
static void feed_member(struct weft_bootstrap* bs, int far, struct in* in, uint8_t* stream, size_t len) {
  struct weft_bs_header h;
  memcpy(&h, stream + WEFT_AUTH_MAC_BYTES, sizeof(h));
  size_t open = sizeof(struct weft_bs_opening);
  if (h.kind != WEFT_BS_RING) {
    sign_frame(bs, stream, len);
    feed_slices(bs, far, in, stream, len);
    for (int more = byte(in) % 4; more > 0 && bs->ninc > 0; more--) {
      uint8_t frame[sizeof(struct weft_bs_opening) + 256];
      memset(frame, 0, sizeof(frame));
      uint8_t plen = byte(in);
      take(in, frame + WEFT_AUTH_MAC_BYTES, sizeof(struct weft_bs_header) + plen);
      sign_frame(bs, frame, open + plen);
      feed_slices(bs, far, in, frame, open + plen);
    }
    return feed_last(bs, far, in, stream, 0);
  }
  feed_slices(bs, far, in, stream, open);
  uint8_t challenge[WEFT_AUTH_NONCE_BYTES], answer[WEFT_AUTH_MAC_BYTES];
  if (recv(far, challenge, sizeof(challenge), MSG_DONTWAIT) == (ssize_t)sizeof(challenge)) {
    weft_auth_mac(&job_key, WEFT_AUTH_LABEL_PEER, challenge, &h, sizeof(h), answer);
    feed_slices(bs, far, in, answer, sizeof(answer));
  }
  feed_last(bs, far, in, stream + open, len - open);
}

static void fuzz_allgather_on(struct weft_bootstrap* bs) {
  int sink[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sink) != 0) return;
  bs->next_fd = sink[0];
  bs->peers[bs->rank].addr = (union weft_socket_addr){.sin = {.sin_family = AF_INET, .sin_port = htons(1)}};
  if (weft_bs_allgather(bs, bs->peers, sizeof(*bs->peers), NULL, weft_socket_deadline(5)) == ncclSuccess)
    (void)weft_bs_peers_valid(bs->peers, bs->nranks, NULL, 0);
  close(sink[1]);
}

/* Connections to rank 1: each a stream (member: header only, the harness signs as a sender does);
 * then every receivable message is taken by a receive of fuzzer-chosen size. */
static void fuzz_incoming(struct in* in, int member) {
  struct weft_bootstrap* bs = fake_bootstrap(2 + byte(in) % 3);
  int nconn = 1 + byte(in) % 4;
  for (int k = 0; k < nconn && in->n > 0 && bs->prev_fd < 0; k++) {
    uint8_t len = byte(in);
    uint8_t stream[sizeof(struct weft_bs_opening) + 256];
    memset(stream, 0, sizeof(stream));
    size_t head = member ? sizeof(struct weft_bs_header) : 0;
    take(in, stream + (member ? WEFT_AUTH_MAC_BYTES : 0), head + len);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0) break;
    if (!weft_bs_incoming_add(bs, sv[0])) {
      close(sv[1]);
      break;
    }
    if (member)
      feed_member(bs, sv[1], in, stream, head + len + WEFT_AUTH_MAC_BYTES);
    else
      feed_last(bs, sv[1], in, stream, head + len);
    close(sv[1]);
  }
  for (struct weft_bs_msg* m = bs->parked; m != NULL;) {
    struct weft_bs_msg* next = m->next;
    if (m->seq <= bs->recv_seq[m->src]) {
      size_t cap = byte(in);
      char* buf = malloc(cap + 1);
      (void)weft_bs_recv_kind(bs, m->src, m->kind, m->tag, buf, cap, NULL, weft_socket_deadline(1));
      free(buf);
      break; /* the list changed under us */
    }
    m = next;
  }
  if (bs->prev_fd >= 0) {
    /* A ring opening was accepted: nothing more arrives on it (stream already closed). */
    fuzz_allgather_on(bs);
  }
  weft_bootstrap_destroy(bs);
}

/* What the root says on the check-in link while the ring forms (a GONE reply), in slices. */
static void fuzz_rootlink(struct in* in, int member) {
  struct weft_bootstrap* bs = fake_bootstrap(2 + byte(in) % 3);
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0) return weft_bootstrap_destroy(bs);
  bs->root.fd = sv[0];
  bs->root.key = job_key;
  memcpy(bs->root.nonce, fixed_nonce, sizeof(fixed_nonce));
  struct weft_bs_signed_reply r;
  take(in, &r, sizeof(r));
  if (member) weft_auth_mac(&job_key, WEFT_AUTH_LABEL_REPLY, fixed_nonce, &r.body, sizeof(r.body), r.mac);
  ncclResult_t res = ncclSuccess;
  for (size_t off = 0; off < sizeof(r) && res == ncclSuccess;) {
    size_t slice = 1 + byte(in) % 128;
    if (slice > sizeof(r) - off) slice = sizeof(r) - off;
    if (send(sv[1], (char*)&r + off, slice, MSG_NOSIGNAL) != (ssize_t)slice) abort();
    off += slice;
    res = weft_bs_root_watch_read(bs, "fuzzing");
  }
  /* A whole reply always ends the wait: a rank is named or the message refused. */
  if (res == ncclSuccess) abort();
  close(sv[1]);
  weft_bootstrap_destroy(bs);
}

/* The ring all-gather on an established connection: length prefixes and slices, raw. */
static void fuzz_allgather(struct in* in) {
  struct weft_bootstrap* bs = fake_bootstrap(2 + byte(in) % 3);
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0) return weft_bootstrap_destroy(bs);
  size_t len = in->n < 4096 ? in->n : 4096;
  if (len && send(sv[1], in->p, len, MSG_NOSIGNAL) != (ssize_t)len) abort();
  shutdown(sv[1], SHUT_WR);
  bs->prev_fd = sv[0];
  fuzz_allgather_on(bs);
  close(sv[1]);
  weft_bootstrap_destroy(bs);
}

/* Addresses as peers send them (split message, all-gather slots). */
static void fuzz_addr(struct in* in) {
  union weft_socket_addr a[4];
  take(in, a, sizeof(a));
  char text[WEFT_SOCKET_ADDR_STRLEN];
  for (int i = 0; i < 4; i++) {
    weft_socket_addr_str(&a[i], text, sizeof(text));
    if (weft_socket_addr_valid(&a[i]) && weft_socket_addr_port(&a[i]) <= 0) abort();
    (void)weft_socket_addr_len(&a[i]);
    (void)weft_socket_addr_equal(&a[i], &a[(i + 1) % 4]);
  }
  struct weft_bs_peer peers[4];
  memset(peers, 0, sizeof(peers));
  for (int i = 0; i < 4; i++) peers[i].addr = a[i];
  (void)weft_bs_peers_valid(peers, 4, text, sizeof(text));
}

/* The socket network's listener: openings join one assembling connection, as sock_accept does. */
static void fuzz_hello(struct in* in, int member) {
  static const uint8_t challenge[WEFT_AUTH_NONCE_BYTES] = {9, 9};
  int have_id = 0, nfound = 0, fds[WEFT_NET_SOCKET_MAX_SOCKS + 1];
  uint64_t id = 0;
  uint32_t nsocks = 0;
  for (int i = 0; i <= WEFT_NET_SOCKET_MAX_SOCKS; i++) fds[i] = -1;
  while (in->n > 0) {
    struct weft_net_socket_opening o;
    take(in, &o, sizeof(o));
    if (member) {
      o.h.magic = WEFT_NET_SOCKET_MAGIC; /* a member's bugs are elsewhere: reach the placement */
      weft_auth_mac(&job_key, WEFT_AUTH_LABEL_NET, challenge, &o.h, sizeof(o.h), o.mac);
    }
    if (!weft_auth_check(&job_key, WEFT_AUTH_LABEL_NET, challenge, &o.h, sizeof(o.h), o.mac)) continue;
    char why[64];
    if (!weft_net_socket_hello_fits(have_id, id, nsocks, fds, &o.h, why, sizeof(why))) continue;
    if (!have_id) {
      have_id = 1;
      id = o.h.id;
      nsocks = o.h.nsocks;
    }
    fds[o.h.index] = 100 + nfound++;
    if (nfound == (int)nsocks + 1) { /* complete: the next hello starts another connection */
      have_id = nfound = 0;
      for (int i = 0; i <= WEFT_NET_SOCKET_MAX_SOCKS; i++) fds[i] = -1;
    }
  }
}

/* A receiver's posted buffers and the header that arrives: the payload goes where it matched. */
static void fuzz_msghdr(struct in* in, int member) {
  int nbuf = 1 + byte(in) % 8, tags[8];
  size_t sizes[8];
  char* bufs[8];
  for (int i = 0; i < nbuf; i++) {
    uint16_t sz;
    take(in, &tags[i], sizeof(tags[i]));
    take(in, &sz, sizeof(sz));
    sizes[i] = sz % 4097;
    bufs[i] = malloc(sizes[i] ? sizes[i] : 1);
  }
  struct weft_net_socket_msg_hdr hdr;
  take(in, &hdr, sizeof(hdr));
  if (member) hdr.magic = (uint32_t)WEFT_NET_SOCKET_MAGIC;
  int i = weft_net_socket_match(&hdr, nbuf, tags, sizes);
  if (i >= nbuf || i < -2) abort();
  /* The receive writes hdr.size bytes into the matched buffer. */
  if (i >= 0 && hdr.size <= (1u << 16)) memset(bufs[i], 0x5a, (size_t)hdr.size);
  for (int k = 0; k < nbuf; k++) free(bufs[k]);
}

/* NCCL_COMM_ID and other address strings; only numeric hosts are resolved (no DNS here). */
static void fuzz_addrstr(struct in* in) {
  char text[300];
  size_t len = in->n < sizeof(text) - 1 ? in->n : sizeof(text) - 1;
  size_t hostlen = 1 + byte(in) % 80;
  take(in, text, len);
  text[len] = '\0';
  char host[80];
  long port;
  if (!weft_socket_split_host_port(text, host, hostlen, &port)) return;
  if (strnlen(host, hostlen) == hostlen || port < 0 || port > 65535) abort();
  struct in6_addr raw;
  if (inet_pton(AF_INET, host, &raw) != 1 && inet_pton(AF_INET6, host, &raw) != 1) return;
  union weft_socket_addr a;
  if (weft_socket_addr_parse(text, AF_UNSPEC, &a) != ncclSuccess) return; /* hostlen was too short */
  if (weft_socket_addr_port(&a) != port) abort();
  char out[WEFT_SOCKET_ADDR_STRLEN];
  weft_socket_addr_str(&a, out, sizeof(out));
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  struct in in = {data + 2, size - 2};
  int member = data[1] & 1;
  switch (data[0] % P_COUNT) {
    case P_CHECKIN:
      fuzz_checkin(&in, member);
      break;
    case P_REPLY:
      fuzz_reply(&in, member);
      break;
    case P_INCOMING:
      fuzz_incoming(&in, member);
      break;
    case P_ALLGATHER:
      fuzz_allgather(&in);
      break;
    case P_ADDR:
      fuzz_addr(&in);
      break;
    case P_HELLO:
      fuzz_hello(&in, member);
      break;
    case P_MSGHDR:
      fuzz_msghdr(&in, member);
      break;
    case P_ADDRSTR:
      fuzz_addrstr(&in);
      break;
    case P_ROOTLINK:
      fuzz_rootlink(&in, member);
      break;
  }
  return 0;
}

/* Seeds: one valid message of each kind, as a member sends it. */
static void seed(const char* dir, const char* name, int parser, const void* body, size_t len) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE* f = fopen(path, "wb");
  if (f == NULL) return;
  uint8_t head[2] = {(uint8_t)parser, 1};
  fwrite(head, 1, 2, f);
  fwrite(body, 1, len, f);
  fclose(f);
}

static union weft_socket_addr loopback(int port) {
  union weft_socket_addr a;
  memset(&a, 0, sizeof(a));
  a.sin.sin_family = AF_INET;
  a.sin.sin_port = htons((uint16_t)port);
  a.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

static void write_seeds(const char* dir) {
  uint8_t buf[1024];
  size_t n = 0;
  for (int r = 0; r < 3; r++) { /* three ranks check in, the last one leaves */
    struct weft_bs_signed_checkin m;
    memset(&m, 0, sizeof(m));
    m.body = (struct weft_bs_checkin){.magic = FUZZ_MAGIC,
                                      .type = WEFT_SOCKET_BOOTSTRAP,
                                      .kind = WEFT_BS_CHECKIN,
                                      .rank = r,
                                      .nranks = 3,
                                      .nroots = 1,
                                      .iroot = 0,
                                      .listen = loopback(4000 + r)};
    buf[n++] = r == 2;
    memcpy(buf + n, &m, sizeof(m));
    n += sizeof(m);
  }
  seed(dir, "checkin", P_CHECKIN, buf, n);
  struct weft_bs_signed_reply rep;
  memset(&rep, 0, sizeof(rep));
  rep.body = (struct weft_bs_reply){.kind = WEFT_BS_REPLY_MISSING,
                                    .count = 2,
                                    .nlisted = 2,
                                    .nneeded = 4,
                                    .nleft = 1,
                                    .nlisted_left = 1,
                                    .gone = -1,
                                    .missing = {1, 3, 2}};
  buf[0] = 3, buf[1] = 200;
  memcpy(buf + 2, &rep, sizeof(rep));
  seed(dir, "reply-missing", P_REPLY, buf, 2 + sizeof(rep));
  rep.body = (struct weft_bs_reply){.kind = WEFT_BS_REPLY_NEXT, .next = loopback(4001)};
  memcpy(buf + 2, &rep, sizeof(rep));
  seed(dir, "reply-next", P_REPLY, buf, 2 + sizeof(rep));
  rep.body = (struct weft_bs_reply){
      .kind = WEFT_BS_REPLY_GONE, .nneeded = 4, .nleft = 1, .nlisted_left = 1, .gone = 2, .missing = {2}};
  buf[0] = 2; /* 4 ranks */
  memcpy(buf + 1, &rep, sizeof(rep));
  memset(buf + 1 + sizeof(rep), 60, 8); /* slices */
  seed(dir, "rootlink-gone", P_ROOTLINK, buf, 1 + sizeof(rep) + 8);
  /* Rank 0 sends a 5-byte message and a 3-byte one on the same connection to rank 1 of 2, then
   * opens the ring. */
  struct weft_bs_header h = {.magic = FUZZ_MAGIC,
                             .type = WEFT_SOCKET_BOOTSTRAP,
                             .kind = WEFT_BS_P2P,
                             .src = 0,
                             .dst = 1,
                             .tag = 3,
                             .seq = 1,
                             .size = 5};
  n = 0;
  buf[n++] = 0; /* 2 ranks */
  buf[n++] = 1; /* 2 connections */
  buf[n++] = 5;
  memcpy(buf + n, &h, sizeof(h));
  n += sizeof(h);
  memcpy(buf + n, "hello", 5);
  n += 5;
  memset(buf + n, 63, 2); /* slices of 64 bytes */
  n += 2;
  buf[n++] = 1; /* one more frame on the kept connection: a 3-byte message */
  buf[n++] = 3;
  h.seq = 2;
  h.size = 3;
  memcpy(buf + n, &h, sizeof(h));
  n += sizeof(h);
  memcpy(buf + n, "abc", 3);
  n += 3;
  memset(buf + n, 63, 2);
  n += 2;
  h = (struct weft_bs_header){
      .magic = FUZZ_MAGIC, .type = WEFT_SOCKET_BOOTSTRAP, .kind = WEFT_BS_RING, .src = 0, .dst = 1};
  buf[n++] = 0;
  memcpy(buf + n, &h, sizeof(h));
  n += sizeof(h);
  memset(buf + n, 16, 8);
  n += 8;
  buf[n++] = 8; /* receive size */
  seed(dir, "incoming", P_INCOMING, buf, n);
  n = 0;
  buf[n++] = 0; /* 2 ranks: one slot arrives */
  uint64_t prefix = sizeof(struct weft_bs_peer);
  memcpy(buf + n, &prefix, sizeof(prefix));
  n += sizeof(prefix);
  struct weft_bs_peer a = {.addr = loopback(4000)};
  memcpy(buf + n, &a, sizeof(a));
  n += sizeof(a);
  seed(dir, "allgather", P_ALLGATHER, buf, n);
  union weft_socket_addr addrs[4] = {loopback(1), loopback(2), loopback(3), loopback(4)};
  addrs[3].sin6.sin6_family = AF_INET6;
  seed(dir, "addr", P_ADDR, addrs, sizeof(addrs));
  struct weft_net_socket_opening o[3];
  memset(o, 0, sizeof(o));
  for (int i = 0; i < 3; i++)
    o[i].h = (struct weft_net_socket_hello){
        .magic = WEFT_NET_SOCKET_MAGIC, .id = 42, .index = (uint32_t)(2 - i), .nsocks = 2};
  seed(dir, "hello", P_HELLO, o, sizeof(o));
  n = 0;
  buf[n++] = 1; /* 2 buffers */
  int tag = 5;
  uint16_t sz = 100;
  for (int i = 0; i < 2; i++, tag++) {
    memcpy(buf + n, &tag, sizeof(tag));
    n += sizeof(tag);
    memcpy(buf + n, &sz, sizeof(sz));
    n += sizeof(sz);
  }
  struct weft_net_socket_msg_hdr mh = {.size = 64, .tag = 6, .magic = (uint32_t)WEFT_NET_SOCKET_MAGIC};
  memcpy(buf + n, &mh, sizeof(mh));
  n += sizeof(mh);
  seed(dir, "msghdr", P_MSGHDR, buf, n);
  static const char* texts[] = {
      "\x20"
      "127.0.0.1:29500",
      "\x40[::1]:1234",
      "\x10"
      "example.org:80"};
  for (int i = 0; i < 3; i++) {
    char name[16];
    snprintf(name, sizeof(name), "addrstr-%d", i);
    seed(dir, name, P_ADDRSTR, texts[i], strlen(texts[i]));
  }
}

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  (void)argc;
  (void)argv;
  memset(&job_key, 0x42, sizeof(job_key));
  const char* dir = getenv("WEFT_FUZZ_SEEDS");
  if (dir != NULL && dir[0] != '\0') write_seeds(dir);
  return 0;
}
