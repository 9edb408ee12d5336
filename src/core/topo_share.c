/* Topology detection once per host. Every process reading the machine through hwloc costs about
 * 20 ms of kernel time, so 256 processes of one host (weftrun -n 256) spent half their init on
 * it. The host's first rank detects and the tree reaches one rank after another of every other
 * process of the host along a binomial tree (log2 rounds, no rank sends more than that many
 * times); a rank keeps it as its process's own detection when it was read under the same
 * settings, and otherwise detects itself. Ranks of the first rank's process share its detection
 * in memory already (graph/detect_shared.c). */
#include "core/topo_share.h"

#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "graph/graph.h"
#include "util/check.h"
#include "util/log.h"

#define SHARE_HEAD_TAG 0x57460200 /* struct share_head */
#define SHARE_TEXT_TAG 0x57460201 /* the tree's text, len bytes */

struct share_head {
  uint64_t settings; /* hash of the settings the tree was read under */
  uint64_t len;      /* 0: no tree (the first rank loads NCCL_TOPO_FILE or could not detect) */
  char method[16];   /* "hwloc" or "sysfs" */
};

/* The host's first rank, then the ranks of the host in other processes, in rank order. */
static int share_members(const struct ncclComm* comm, int* members) {
  uint64_t first_pid = comm->ctx.peers[comm->ctx.local_ranks[0]].pid_hash;
  int n = 0;
  members[n++] = comm->ctx.local_ranks[0];
  for (int i = 1; i < comm->ctx.local_nranks; i++)
    if (comm->ctx.peers[comm->ctx.local_ranks[i]].pid_hash != first_pid)
      members[n++] = comm->ctx.local_ranks[i];
  return n;
}

static void first_rank_tree(struct share_head* head, char** text) {
  const char* method = NULL;
  size_t len = 0;
  *text = NULL;
  memset(head, 0, sizeof(*head));
  if (weft_topo_file()) return; /* every rank loads it */
  if (weft_topo_detect_text(text, &len, &head->settings, &method) != ncclSuccess) return;
  head->len = len;
  snprintf(head->method, sizeof(head->method), "%s", method);
}

static ncclResult_t receive_tree(struct ncclComm* comm, int parent, struct share_head* head, char** text) {
  *text = NULL;
  WEFT_CHECK(weft_bootstrap_recv(comm->ctx.bootstrap, parent, SHARE_HEAD_TAG, head, sizeof(*head)));
  if (head->len == 0) return ncclSuccess;
  if ((*text = malloc(head->len)) == NULL) {
    WEFT_WARN("rank %d: out of memory for the %llu-byte topology tree of rank %d", comm->ctx.rank,
              (unsigned long long)head->len, parent);
    return ncclSystemError;
  }
  return weft_bootstrap_recv(comm->ctx.bootstrap, parent, SHARE_TEXT_TAG, *text, head->len);
}

/* Member i of n passes the tree to i + 2^k for every 2^k > i, farthest first. */
static ncclResult_t pass_on(struct ncclComm* comm, const int* members, int n, int i,
                            const struct share_head* head, const char* text) {
  int top = 1;
  while (top < n) top <<= 1;
  for (int step = top; step > i; step >>= 1) {
    if (i + step >= n) continue;
    int child = members[i + step];
    WEFT_CHECK(weft_bootstrap_send(comm->ctx.bootstrap, child, SHARE_HEAD_TAG, head, sizeof(*head)));
    if (head->len)
      WEFT_CHECK(weft_bootstrap_send(comm->ctx.bootstrap, child, SHARE_TEXT_TAG, text, head->len));
  }
  return ncclSuccess;
}

static int highest_bit(int i) {
  int b = 1;
  while (b * 2 <= i) b *= 2;
  return b;
}

ncclResult_t weft_topo_share_detection(struct ncclComm* comm) {
  if (comm->ctx.local_nranks < 2) return ncclSuccess;
  int* members = malloc(sizeof(int) * (size_t)comm->ctx.local_nranks);
  if (members == NULL) return ncclSystemError;
  int n = share_members(comm, members), i = 0;
  while (i < n && members[i] != comm->ctx.rank) i++;
  if (n < 2 || i == n) { /* one process on this host, or this rank shares its first rank's memory */
    free(members);
    return ncclSuccess;
  }
  struct share_head head;
  char* text = NULL;
  ncclResult_t res = ncclSuccess;
  if (i == 0)
    first_rank_tree(&head, &text);
  else
    res = receive_tree(comm, members[i - highest_bit(i)], &head, &text);
  if (res == ncclSuccess) res = pass_on(comm, members, n, i, &head, text);
  if (res == ncclSuccess && i > 0 && head.len > 0) {
    head.method[sizeof(head.method) - 1] = 0;
    if (weft_topo_detect_adopt(text, head.len, head.settings, head.method))
      WEFT_INFO(WEFT_INIT | WEFT_GRAPH, "Topology detection: rank %d's, shared within the host (%s)",
                members[0], head.method);
    else
      WEFT_INFO(WEFT_INIT | WEFT_GRAPH,
                "Topology detection: rank %d's tree not taken (read under other detection settings)",
                members[0]);
  }
  free(text);
  free(members);
  return res;
}
