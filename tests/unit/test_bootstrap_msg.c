/* Bootstrap messages are signed without a round trip: a send completes while its receiver is
 * busy elsewhere, and the receiver keeps only messages signed for its session, once each, with
 * the payload they were signed with. Ring openings still answer a challenge. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/internal.h"
#include "check.h"
#include "util/param.h"

#define MAGIC 0x5745465454455354ULL

static struct weft_auth_key job_key;

/* Rank 1 of 2, as after its all-gather (no sockets of its own). */
static struct weft_bootstrap* fake_rank1(void) {
  struct weft_bootstrap* bs = calloc(1, sizeof(*bs));
  bs->rank = 1;
  bs->nranks = 2;
  bs->magic = MAGIC;
  bs->key = job_key;
  bs->listen_fd = bs->next_fd = bs->prev_fd = bs->root.fd = -1;
  weft_auth_random(bs->nonce, sizeof(bs->nonce));
  bs->peers = calloc(2, sizeof(*bs->peers));
  bs->send_seq = calloc(2, sizeof(*bs->send_seq));
  bs->recv_seq = calloc(2, sizeof(*bs->recv_seq));
  return bs;
}

struct wire {
  struct weft_bs_opening open;
  char payload[16];
};

/* A message from rank 0, signed as a sender with (key, nonce) signs it. */
static struct wire message(const struct weft_auth_key* key, const uint8_t* nonce, uint64_t seq,
                           const char* text) {
  struct wire w;
  memset(&w, 0, sizeof(w));
  snprintf(w.payload, sizeof(w.payload), "%s", text);
  w.open.hdr = (struct weft_bs_header){.magic = MAGIC,
                                       .type = WEFT_SOCKET_BOOTSTRAP,
                                       .kind = WEFT_BS_P2P,
                                       .src = 0,
                                       .dst = 1,
                                       .tag = 7,
                                       .seq = seq,
                                       .size = sizeof(w.payload)};
  weft_sha256(w.payload, sizeof(w.payload), w.open.hdr.digest);
  weft_auth_mac(key, WEFT_AUTH_LABEL_MESSAGE, nonce, &w.open.hdr, sizeof(w.open.hdr), w.open.mac);
  return w;
}

static int nparked(const struct weft_bootstrap* bs) {
  int n = 0;
  for (const struct weft_bs_msg* m = bs->parked; m; m = m->next) n++;
  return n;
}

/* Feed one connection's bytes; returns how many messages are parked afterwards. */
static int deliver(struct weft_bootstrap* bs, const void* bytes, size_t len) {
  int sv[2];
  EXPECT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
  EXPECT(weft_bs_incoming_add(bs, sv[0]));
  EXPECT(send(sv[1], bytes, len, 0) == (ssize_t)len);
  shutdown(sv[1], SHUT_WR);
  for (int i = 0; i < 16 && bs->ninc > 0; i++) weft_bs_incoming_read(bs, 0);
  EXPECT_MSG(bs->ninc == 0, "the connection neither completed nor was dropped");
  close(sv[1]);
  return nparked(bs);
}

static void test_receiver_checks(void) {
  struct weft_bootstrap* bs = fake_rank1();
  struct wire w = message(&job_key, bs->nonce, 1, "first");
  EXPECT_EQ_INT(deliver(bs, &w, sizeof(w)), 1);
  EXPECT_MSG(deliver(bs, &w, sizeof(w)) == 1, "a replayed message was kept");
  struct wire later = message(&job_key, bs->nonce, 3, "third");
  EXPECT_EQ_INT(deliver(bs, &later, sizeof(later)), 2); /* parked beyond the gap */
  EXPECT_MSG(deliver(bs, &later, sizeof(later)) == 2, "a replay of a parked message was kept");
  struct wire altered = message(&job_key, bs->nonce, 2, "second");
  altered.payload[0] ^= 1;
  EXPECT_MSG(deliver(bs, &altered, sizeof(altered)) == 2, "a message with an altered payload was kept");
  uint8_t old_session[WEFT_AUTH_NONCE_BYTES];
  weft_auth_random(old_session, sizeof(old_session));
  struct wire stale = message(&job_key, old_session, 2, "second");
  EXPECT_MSG(deliver(bs, &stale, sizeof(stale)) == 2, "a message signed for another session was kept");
  struct weft_auth_key other;
  weft_auth_random(&other, sizeof(other));
  struct wire forged = message(&other, bs->nonce, 2, "second");
  EXPECT_MSG(deliver(bs, &forged, sizeof(forged)) == 2, "a message signed with another key was kept");
  struct wire second = message(&job_key, bs->nonce, 2, "second");
  EXPECT_EQ_INT(deliver(bs, &second, sizeof(second)), 3);
  EXPECT_EQ_INT((int)bs->recv_seq[0], 3);
  char buf[16];
  EXPECT(weft_bs_recv_kind(bs, 0, WEFT_BS_P2P, 7, buf, sizeof(buf), NULL, weft_socket_deadline(1)) ==
         ncclSuccess);
  EXPECT_MSG(strcmp(buf, "first") == 0, "first message reads '%s'", buf);
  weft_bootstrap_destroy(bs);
}

/* A ring opening gets a challenge; only the right answer makes it the predecessor link. */
static void ring_case(int answer_right) {
  struct weft_bootstrap* bs = fake_rank1();
  int sv[2];
  EXPECT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
  EXPECT(weft_bs_incoming_add(bs, sv[0]));
  struct weft_bs_opening open = {
      .hdr = {.magic = MAGIC, .type = WEFT_SOCKET_BOOTSTRAP, .kind = WEFT_BS_RING, .src = 0, .dst = 1}};
  EXPECT(send(sv[1], &open, sizeof(open), 0) == (ssize_t)sizeof(open));
  weft_bs_incoming_read(bs, 0);
  uint8_t challenge[WEFT_AUTH_NONCE_BYTES], answer[WEFT_AUTH_MAC_BYTES];
  EXPECT_MSG(recv(sv[1], challenge, sizeof(challenge), 0) == (ssize_t)sizeof(challenge),
             "no challenge after a ring opening");
  weft_auth_mac(&job_key, WEFT_AUTH_LABEL_PEER, challenge, &open.hdr, sizeof(open.hdr), answer);
  answer[0] ^= (uint8_t)!answer_right;
  EXPECT(send(sv[1], answer, sizeof(answer), 0) == (ssize_t)sizeof(answer));
  weft_bs_incoming_read(bs, 0);
  EXPECT_EQ_INT(bs->ninc, 0);
  EXPECT_MSG((bs->prev_fd >= 0) == answer_right, "ring opening with a %s answer: prev_fd %d",
             answer_right ? "right" : "wrong", bs->prev_fd);
  if (!answer_right) weft_socket_close(sv[0]);
  close(sv[1]);
  weft_bootstrap_destroy(bs);
}

struct pair {
  ncclUniqueId id;
  int rank;
  ncclResult_t send_res, recv_res;
  char got[32];
  pthread_mutex_t* mu;
  pthread_cond_t* cv;
  int* sent;
};

/* Rank 0 sends while rank 1 is outside the bootstrap; rank 1 receives only after the send returned. */
static void* pair_main(void* p) {
  struct pair* a = p;
  struct weft_bootstrap* bs = NULL;
  EXPECT(weft_bootstrap_init(&a->id, a->rank, 2, NULL, &bs) == ncclSuccess);
  if (bs == NULL) return NULL;
  if (a->rank == 0) {
    a->send_res = weft_bootstrap_send(bs, 1, 5, "while you were away", 20);
    pthread_mutex_lock(a->mu);
    *a->sent = 1;
    pthread_cond_broadcast(a->cv);
    pthread_mutex_unlock(a->mu);
  } else {
    pthread_mutex_lock(a->mu);
    while (!*a->sent) pthread_cond_wait(a->cv, a->mu);
    pthread_mutex_unlock(a->mu);
    a->recv_res = weft_bootstrap_recv(bs, 0, 5, a->got, 20);
  }
  weft_bootstrap_barrier(bs);
  weft_bootstrap_destroy(bs);
  return NULL;
}

static void test_send_without_receiver(void) {
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
  int sent = 0;
  struct pair a[2];
  ncclUniqueId id;
  EXPECT(weft_bootstrap_get_unique_id(&id) == ncclSuccess);
  pthread_t t[2];
  for (int r = 0; r < 2; r++) {
    a[r] = (struct pair){.id = id, .rank = r, .mu = &mu, .cv = &cv, .sent = &sent};
    pthread_create(&t[r], NULL, pair_main, &a[r]);
  }
  for (int r = 0; r < 2; r++) pthread_join(t[r], NULL);
  EXPECT_MSG(a[0].send_res == ncclSuccess, "a send to a rank outside the bootstrap failed: %d",
             a[0].send_res);
  EXPECT(a[1].recv_res == ncclSuccess);
  EXPECT_MSG(strcmp(a[1].got, "while you were away") == 0, "received '%s'", a[1].got);
}

int main(void) {
  /* A send that waited for its receiver would fail here within seconds instead of passing. */
  setenv("WEFT_BOOTSTRAP_TIMEOUT", "5", 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  weft_param_reload();
  weft_auth_random(&job_key, sizeof(job_key));
  test_receiver_checks();
  ring_case(1);
  ring_case(0);
  test_send_without_receiver();
  return test_finish("test_bootstrap_msg");
}
