/* Messages between ranks of one process go through memory. Over TCP each message cost a
 * connection (connect, accept, close; p2p.c now keeps a bounded number of them for further
 * messages), and 1,024 thread ranks made about 70 of them each during init, most of its time. Every
 * bootstrap object of the process is listed here by its session nonce, which each rank learns
 * for every peer in the address all-gather: a nonce found in the list is a rank of this process,
 * and the message is appended to that object's mailbox and its eventfd signalled, which its waits
 * poll beside the sockets. Nothing crosses a process boundary, so there is nothing to
 * authenticate. A forked child starts with an empty list. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "bootstrap/internal.h"
#include "util/log.h"

#define NBUCKETS 4096 /* chains stay short at thousands of ranks per process */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct weft_bootstrap* buckets[NBUCKETS];
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void forget_all(void) { memset(buckets, 0, sizeof(buckets)); }
static void install_atfork(void) { pthread_atfork(NULL, NULL, forget_all); }

static unsigned bucket_of(const uint8_t* nonce) {
  unsigned h;
  memcpy(&h, nonce, sizeof(h)); /* nonces are random bytes */
  return h % NBUCKETS;
}

/* Under the lock. */
static struct weft_bootstrap* find(const uint8_t* nonce) {
  struct weft_bootstrap* b = buckets[bucket_of(nonce)];
  while (b && memcmp(b->nonce, nonce, sizeof(b->nonce)) != 0) b = b->local_next;
  return b;
}

ncclResult_t weft_bs_local_open(struct weft_bootstrap* bs) {
  pthread_once(&atfork_once, install_atfork);
  bs->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (bs->event_fd < 0) {
    WEFT_WARN("Bootstrap: rank %d: eventfd failed: %s", bs->rank, strerror(errno));
    return ncclSystemError;
  }
  bs->local_pid = getpid();
  pthread_mutex_lock(&lock);
  unsigned b = bucket_of(bs->nonce);
  bs->local_next = buckets[b];
  buckets[b] = bs;
  pthread_mutex_unlock(&lock);
  return ncclSuccess;
}

void weft_bs_msg_free_list(struct weft_bs_msg* m) {
  while (m) {
    struct weft_bs_msg* next = m->next;
    free(m->data);
    free(m);
    m = next;
  }
}

void weft_bs_local_close(struct weft_bootstrap* bs) {
  if (bs->event_fd < 0) return;
  pthread_mutex_lock(&lock);
  if (bs->local_pid == getpid()) /* a forked child's copy was never listed there */
    for (struct weft_bootstrap** p = &buckets[bucket_of(bs->nonce)]; *p; p = &(*p)->local_next)
      if (*p == bs) {
        *p = bs->local_next;
        break;
      }
  struct weft_bs_msg* mail = bs->mailbox;
  bs->mailbox = NULL;
  pthread_mutex_unlock(&lock);
  weft_bs_msg_free_list(mail);
  close(bs->event_fd);
  bs->event_fd = -1;
}

int weft_bs_local_deliver(struct weft_bootstrap* bs, int peer, const struct weft_bs_msg* msg,
                          const void* data) {
  const uint8_t* nonce = bs->peers[peer].nonce;
  pthread_mutex_lock(&lock);
  int here = find(nonce) != NULL;
  pthread_mutex_unlock(&lock);
  if (!here) return 0;
  struct weft_bs_msg* m = malloc(sizeof(*m));
  char* copy = msg->size ? malloc(msg->size) : NULL;
  if (m == NULL || (msg->size && copy == NULL)) {
    free(m);
    free(copy);
    WEFT_WARN("Bootstrap: rank %d: out of memory for a %zu-byte message to rank %d", bs->rank, msg->size,
              peer);
    return -1;
  }
  *m = *msg;
  m->next = NULL;
  m->data = copy;
  if (msg->size) memcpy(copy, data, msg->size);
  pthread_mutex_lock(&lock);
  struct weft_bootstrap* to = find(nonce); /* it may have closed meanwhile: then over TCP */
  if (to != NULL) {
    struct weft_bs_msg** tail = &to->mailbox;
    while (*tail) tail = &(*tail)->next;
    *tail = m;
    uint64_t one = 1;
    (void)!write(to->event_fd, &one, sizeof(one)); /* the counter is far from full: cannot fail */
  }
  pthread_mutex_unlock(&lock);
  if (to == NULL) weft_bs_msg_free_list(m);
  return to != NULL;
}

void weft_bs_local_drain(struct weft_bootstrap* bs,
                         void (*take)(struct weft_bootstrap*, struct weft_bs_msg*)) {
  uint64_t count;
  if (read(bs->event_fd, &count, sizeof(count)) < 0) return; /* nothing was signalled */
  pthread_mutex_lock(&lock);
  struct weft_bs_msg* mail = bs->mailbox;
  bs->mailbox = NULL;
  pthread_mutex_unlock(&lock);
  while (mail) {
    struct weft_bs_msg* next = mail->next;
    mail->next = NULL;
    take(bs, mail);
    mail = next;
  }
}
