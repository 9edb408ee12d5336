/* The host-side team functions of the device API. A team is nRanks world ranks, stride apart,
 * this rank at index rank. Weft's LSA team is the ranks of this host (the ranks whose buffers
 * ncclGetLsaDevicePointer reaches), the rail team the ranks at the same place on every host. */
#include "core/api.h"
#include "core/comm.h"
#include "nccl_device/host.h"
#include "util/log.h"

static const ncclTeam_t no_team = {0, -1, 0};

/* This host's ranks as a team, when they are evenly spaced world ranks (a team cannot say
 * otherwise); 0 when they are not. */
static int lsa_stride(const struct ncclComm* comm) {
  if (comm->ctx.local_nranks <= 1) return 1;
  int stride = comm->ctx.local_ranks[1] - comm->ctx.local_ranks[0];
  for (int i = 2; i < comm->ctx.local_nranks; i++) {
    if (comm->ctx.local_ranks[i] - comm->ctx.local_ranks[i - 1] != stride) return 0;
  }
  return stride;
}

static int team_comm_ok(const struct ncclComm* comm, const char* caller) {
  return weft_comm_check(comm, caller) == ncclSuccess;
}

WEFT_API(ncclTeam_t, ncclTeamWorld, ncclComm_t comm) {
  if (!team_comm_ok(comm, "ncclTeamWorld")) return no_team;
  ncclTeam_t t = {comm->ctx.nranks, comm->ctx.rank, 1};
  return t;
}

WEFT_API(ncclTeam_t, ncclTeamLsa, ncclComm_t comm) {
  if (!team_comm_ok(comm, "ncclTeamLsa")) return no_team;
  int stride = lsa_stride(comm);
  if (stride == 0) {
    /* Ranks interleaved across hosts unevenly: only this rank is a team NCCL's shape can hold. */
    WEFT_INFO(WEFT_INIT, "ncclTeamLsa: this host's ranks are not evenly spaced; the LSA team is this rank");
    ncclTeam_t self = {1, 0, 1};
    return self;
  }
  ncclTeam_t t = {comm->ctx.local_nranks, comm->ctx.local_rank, stride};
  return t;
}

/* The ranks at this rank's place on each host: world ranks one LSA team apart, when hosts hold
 * contiguous, equal blocks of ranks; otherwise only this rank. */
WEFT_API(ncclTeam_t, ncclTeamRail, ncclComm_t comm) {
  if (!team_comm_ok(comm, "ncclTeamRail")) return no_team;
  int lsa = comm->ctx.local_nranks;
  ncclTeam_t self = {1, 0, 1};
  if (lsa_stride(comm) != 1 || comm->ctx.nranks % lsa != 0 || comm->ctx.local_ranks[0] % lsa != 0)
    return self;
  ncclTeam_t t = {comm->ctx.nranks / lsa, comm->ctx.rank / lsa, lsa};
  return t;
}

WEFT_API(int, ncclTeamRankToWorld, ncclComm_t comm, ncclTeam_t team, int rank) {
  if (!team_comm_ok(comm, "ncclTeamRankToWorld")) return -1;
  if (rank < 0 || rank >= team.nRanks) {
    WEFT_WARN("ncclTeamRankToWorld: rank %d is not in the team's 0..%d range", rank, team.nRanks - 1);
    return -1;
  }
  int world = comm->ctx.rank + (rank - team.rank) * team.stride;
  if (world < 0 || world >= comm->ctx.nranks) {
    WEFT_WARN("ncclTeamRankToWorld: team {nRanks %d, rank %d, stride %d} is not a team of this communicator",
              team.nRanks, team.rank, team.stride);
    return -1;
  }
  return world;
}

/* The LSA index of a team member, or -1 when it is on another host. */
WEFT_API(int, ncclTeamRankToLsa, ncclComm_t comm, ncclTeam_t team, int rank) {
  int world = pncclTeamRankToWorld(comm, team, rank);
  if (world < 0) return -1;
  for (int i = 0; i < comm->ctx.local_nranks; i++) {
    if (comm->ctx.local_ranks[i] == world) return i;
  }
  return -1;
}
