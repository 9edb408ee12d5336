/* The device API's host-side team functions: the world team, the LSA team (this host's ranks,
 * the ranks ncclGetLsaDevicePointer reaches) and the rail team, with rank conversions, on one
 * host (threads) and on emulated hosts (processes with WEFT_HOSTID) in blocks and interleaved. */
#include <nccl_device.h>

#include "coll_util.h"

static int layout; /* 0: one host; 1: two hosts of consecutive ranks; 2: hosts by rank parity */

static int host_of(int rank, int nranks) {
  if (layout == 1) return rank * 2 / nranks;
  if (layout == 2) return rank % 2;
  return 0;
}

static void hosts_setup(int rank, int nranks) {
  char h[32];
  snprintf(h, sizeof(h), "teams-host-%d", host_of(rank, nranks));
  setenv("WEFT_HOSTID", h, 1);
}

#define WANT_TEAM(t, n, r, s)                                                                             \
  WANT((t).nRanks == (n) && (t).rank == (r) && (t).stride == (s), "team {%d, %d, %d}, want {%d, %d, %d}", \
       (t).nRanks, (t).rank, (t).stride, (n), (r), (s))

static int body(ncclComm_t comm, int rank, int n, void* arg) {
  (void)arg;
  int bad = 0;
  int hosts = layout == 0 ? 1 : 2, per_host = n / hosts;
  ncclTeam_t world = ncclTeamWorld(comm), lsa = ncclTeamLsa(comm), rail = ncclTeamRail(comm);
  WANT_TEAM(world, n, rank, 1);
  if (layout == 2) {
    WANT_TEAM(lsa, per_host, rank / 2, 2);
    WANT_TEAM(rail, 1, 0, 1); /* hosts are not contiguous blocks: no rail NCCL's shape can hold */
  } else {
    WANT_TEAM(lsa, per_host, rank % per_host, 1);
    WANT_TEAM(rail, hosts, rank / per_host, per_host);
  }
  for (int i = 0; i < lsa.nRanks; i++) {
    int w = ncclTeamRankToWorld(comm, lsa, i);
    WANT(w >= 0 && host_of(w, n) == host_of(rank, n), "LSA member %d is world rank %d on another host", i, w);
    WANT(ncclTeamRankToLsa(comm, lsa, i) == i, "LSA member %d maps to LSA index %d", i,
         ncclTeamRankToLsa(comm, lsa, i));
  }
  for (int w = 0; w < n; w++) {
    int want = host_of(w, n) == host_of(rank, n) ? (layout == 2 ? w / 2 : w % per_host) : -1;
    WANT(ncclTeamRankToLsa(comm, world, w) == want, "world rank %d: LSA index %d, want %d", w,
         ncclTeamRankToLsa(comm, world, w), want);
  }
  WANT(ncclTeamRankToWorld(comm, world, n) == -1, "a rank past the team converts");
  WANT(ncclTeamRankToWorld(comm, world, -1) == -1, "a negative rank converts");
  ncclTeam_t foreign = {n, rank, n}; /* members beyond the communicator */
  WANT(ncclTeamRankToWorld(comm, foreign, (rank + 1) % n) == -1 || n == 1, "a foreign team converts");
  return bad;
}

int main(void) {
  alarm(200);
  setenv("WEFT_BACKEND", "host", 1);
  ncclTeam_t none = ncclTeamWorld(NULL);
  EXPECT(none.nRanks == 0 && none.rank == -1);
  EXPECT(ncclTeamRankToWorld(NULL, none, 0) == -1);
  for (int n = 1; n <= 4; n++) EXPECT_MSG(run_threads(n, body, NULL) == 0, "%d ranks on one host", n);
  coll_rank_setup = hosts_setup;
  for (layout = 1; layout <= 2; layout++)
    EXPECT_MSG(run_procs(4, body, NULL, 120) == 0, "4 ranks on two hosts, layout %d", layout);
  coll_rank_setup = NULL;
  return test_finish("test_teams");
}
