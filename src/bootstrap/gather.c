/* All-gathers in log rounds: Bruck's algorithm over the signed point-to-point messages,
 * ceil(log2 n) rounds instead of the ring's n - 1. The first one, of the addresses themselves,
 * first learns the ranks Bruck sends to (weft_bs_gather_addresses). In the round of
 * distance d a rank sends the blocks it holds (its own and the d - 1 after it) to rank - d and
 * receives the next d from rank + d, so each rank sends and receives about n blocks in all, as
 * on the ring, but waits for log2 n partners instead of n - 1 hops. Each message is one TCP
 * connection, so small jobs keep the ring (WEFT_BOOTSTRAP_LOG_GATHER_MIN, measured in
 * docs/PERFORMANCE.md "Init at scale"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/internal.h"
#include "util/check.h"
#include "util/log.h"
#include "util/param.h"

/* The rounds' tags: a gather's messages between two ranks share (kind, tag) with the next
 * gather's, and the sequence numbers keep them in order. */
static ncclResult_t bruck_round(struct weft_bootstrap* bs, char* held, size_t size, int dist, int round,
                                volatile uint32_t* abort_flag, int64_t deadline) {
  int n = bs->nranks, rank = bs->rank;
  int count = dist < n - dist ? dist : n - dist;
  int to = (rank - dist + n) % n, from = (rank + dist) % n;
  WEFT_CHECK(
      weft_bs_send_kind(bs, to, WEFT_BS_GATHER, round, held, (size_t)count * size, abort_flag, deadline));
  return weft_bs_recv_kind(bs, from, WEFT_BS_GATHER, round, held + (size_t)dist * size, (size_t)count * size,
                           abort_flag, deadline);
}

/* held[i] is rank (rank + i) % n's block: what each round sends is contiguous there. */
static ncclResult_t bruck_allgather(struct weft_bootstrap* bs, char* data, size_t size,
                                    volatile uint32_t* abort_flag, int64_t deadline) {
  int n = bs->nranks, rank = bs->rank;
  char* held = malloc((size_t)n * size);
  if (held == NULL) {
    WEFT_WARN("Bootstrap: rank %d: out of memory for an all-gather of %d x %zu bytes", rank, n, size);
    return ncclSystemError;
  }
  memcpy(held, data + (size_t)rank * size, size);
  ncclResult_t res = ncclSuccess;
  for (int dist = 1, round = 0; dist < n && res == ncclSuccess; dist <<= 1, round++)
    res = bruck_round(bs, held, size, dist, round, abort_flag, deadline);
  if (res == ncclSuccess) {
    /* Rotate back: blocks rank..n-1 then 0..rank-1. */
    memcpy(data + (size_t)rank * size, held, (size_t)(n - rank) * size);
    memcpy(data, held + (size_t)(n - rank) * size, (size_t)rank * size);
  }
  free(held);
  return res;
}

static int log_gather_size(const struct weft_bootstrap* bs) {
  int64_t min = weft_param_int("WEFT_BOOTSTRAP_LOG_GATHER_MIN");
  return min > 0 && bs->nranks >= min;
}

int weft_bs_uses_log_gather(const struct weft_bootstrap* bs) {
  return bs->peers_known && log_gather_size(bs);
}

/* The first ring step: our entry to the successor, the predecessor's from it. */
static ncclResult_t learn_prev(struct weft_bootstrap* bs, volatile uint32_t* abort_flag, int64_t deadline) {
  int n = bs->nranks, prev = (bs->rank - 1 + n) % n;
  struct weft_bs_op ops[2];
  weft_bs_op_send(&ops[0], bs->next_fd, (bs->rank + 1) % n, NULL, &bs->peers[bs->rank], sizeof(*bs->peers));
  weft_bs_op_recv(&ops[1], bs->prev_fd, prev, &bs->peers[prev], sizeof(*bs->peers));
  char what[96];
  snprintf(what, sizeof(what), "receiving rank %d's address from it over the ring", prev);
  return weft_bs_progress(bs, ops, 2, NULL, NULL, abort_flag, deadline, what);
}

/* Round k of pointer doubling: we know rank - 2^k and ask it (sending our entry) for the rank
 * 2^k before it; rank + 2^k asks us the same, which teaches us its entry too. Every message
 * goes to a rank whose address and nonce we hold, and carries the sender's own signed word. */
static ncclResult_t double_round(struct weft_bootstrap* bs, int k, volatile uint32_t* abort_flag,
                                 int64_t deadline) {
  int n = bs->nranks, rank = bs->rank, d = 1 << k;
  int before = (rank - d + n) % n, after = (rank + d) % n, further = (rank - 2 * d % n + n) % n;
  const size_t sz = sizeof(*bs->peers);
  WEFT_CHECK(
      weft_bs_send_kind(bs, before, WEFT_BS_FINGER, 2 * k, &bs->peers[rank], sz, abort_flag, deadline));
  WEFT_CHECK(
      weft_bs_recv_kind(bs, after, WEFT_BS_FINGER, 2 * k, &bs->peers[after], sz, abort_flag, deadline));
  WEFT_CHECK(
      weft_bs_send_kind(bs, after, WEFT_BS_FINGER, 2 * k + 1, &bs->peers[before], sz, abort_flag, deadline));
  return weft_bs_recv_kind(bs, before, WEFT_BS_FINGER, 2 * k + 1, &bs->peers[further], sz, abort_flag,
                           deadline);
}

ncclResult_t weft_bs_gather_addresses(struct weft_bootstrap* bs, volatile uint32_t* abort_flag,
                                      int64_t deadline) {
  if (bs->nranks < 3 || !log_gather_size(bs))
    return weft_bs_ring_allgather(bs, bs->peers, sizeof(*bs->peers), abort_flag, deadline);
  /* Bruck's round of distance 2^k sends to rank - 2^k: learn those ranks first. */
  WEFT_CHECK(learn_prev(bs, abort_flag, deadline));
  for (int k = 0; (2 << k) < bs->nranks; k++) WEFT_CHECK(double_round(bs, k, abort_flag, deadline));
  return bruck_allgather(bs, (char*)bs->peers, sizeof(*bs->peers), abort_flag, deadline);
}

ncclResult_t weft_bs_allgather(struct weft_bootstrap* bs, void* data, size_t size,
                               volatile uint32_t* abort_flag, int64_t deadline) {
  if (!weft_bs_uses_log_gather(bs)) return weft_bs_ring_allgather(bs, data, size, abort_flag, deadline);
  ncclResult_t res = bruck_allgather(bs, data, size, abort_flag, deadline);
  WEFT_TRACE(WEFT_BOOTSTRAP, "Bootstrap: rank %d nranks %d log all-gather of %zu bytes: %d", bs->rank,
             bs->nranks, size, (int)res);
  return res;
}
