/* Host numbering from the peer table (core/peers.c weft_peers_map_hosts): hosts in the order
 * of their lowest rank, every rank's host-mates, for one host, one rank per host (the shape the
 * old scan of all earlier ranks made O(n^2)), and hosts whose ranks interleave. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/peers.h"

static int is_first(const uint64_t* host, int p) {
  for (int i = 0; i < p; i++)
    if (host[i] == host[p]) return 0;
  return 1;
}

/* What the numbering must be, the slow obvious way: hosts seen before r's host's first rank. */
static int expected_node(const uint64_t* host, int r) {
  int q = 0, node = 0;
  while (host[q] != host[r]) q++;
  for (int p = 0; p < q; p++) node += is_first(host, p);
  return node;
}

static void check_shape(const char* name, int n, uint64_t (*host_of)(int)) {
  uint64_t* host = calloc(n, sizeof(*host));
  for (int r = 0; r < n; r++) host[r] = host_of(r);
  int* want = calloc(n, sizeof(*want));
  for (int r = 0; r < n; r++) want[r] = expected_node(host, r);
  for (int me = 0; me < n; me += n / 5 + 1) {
    struct ncclComm comm;
    memset(&comm, 0, sizeof(comm));
    comm.ctx.nranks = n;
    comm.ctx.rank = me;
    comm.ctx.peers = calloc(n, sizeof(*comm.ctx.peers));
    for (int r = 0; r < n; r++) comm.ctx.peers[r].host_hash = host[r];
    EXPECT_MSG(weft_peers_map_hosts(&comm) == ncclSuccess, "%s", name);
    int bad = 0, mates = 0, nnodes = 0;
    for (int r = 0; r < n; r++) {
      bad += comm.ctx.rank_to_node[r] != want[r];
      mates += host[r] == host[me];
      nnodes = want[r] + 1 > nnodes ? want[r] + 1 : nnodes;
    }
    EXPECT_MSG(bad == 0, "%s: %d ranks on the wrong host number", name, bad);
    EXPECT_MSG(comm.ctx.nnodes == nnodes && comm.ctx.node == want[me], "%s: %d hosts, rank %d on %d", name,
               comm.ctx.nnodes, me, comm.ctx.node);
    EXPECT_MSG(comm.ctx.local_nranks == mates, "%s: rank %d has %d host-mates, want %d", name, me,
               comm.ctx.local_nranks, mates);
    for (int i = 0; i < comm.ctx.local_nranks; i++) {
      EXPECT(host[comm.ctx.local_ranks[i]] == host[me] &&
             (i == 0 || comm.ctx.local_ranks[i] > comm.ctx.local_ranks[i - 1]));
      if (comm.ctx.local_ranks[i] == me) EXPECT_EQ_INT(comm.ctx.local_rank, i);
    }
    free(comm.ctx.peers);
    free(comm.ctx.rank_to_node);
    free(comm.ctx.local_ranks);
  }
  free(host);
  free(want);
}

static uint64_t one_host(int r) { return (void)r, 0x1234; }
static uint64_t own_host(int r) { return 0x9e3779b97f4a7c15ull * (uint64_t)(r + 1); }
static uint64_t interleaved(int r) { return 1000 + (uint64_t)((r * 7) % 13); }
/* Hashes equal in their low bits, so the table's probing is exercised. */
static uint64_t colliding(int r) { return (uint64_t)(r % 40) << 40; }

int main(void) {
  check_shape("one host", 300, one_host);
  check_shape("a host per rank", 300, own_host);
  check_shape("13 interleaved hosts", 300, interleaved);
  check_shape("colliding hashes", 300, colliding);
  check_shape("one rank", 1, one_host);
  return test_finish("test_peers_hosts");
}
