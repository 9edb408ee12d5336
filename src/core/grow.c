/* ncclCommGetUniqueId and ncclCommGrow: a communicator grows to more ranks. One existing rank (the
 * coordinator) gets an id from its comm and hands it to the new ranks out of band; the existing
 * ranks learn it from the coordinator over their comm, and then every rank joins a fresh bootstrap
 * through it. Existing ranks keep their ranks, new ranks take the ones above. */
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "core/api.h"
#include "core/init.h"
#include "core/split.h"
#include "util/check.h"

/* The tail of a grow id describes the comm it grows, so a new rank's arguments are checked before
 * it joins (the bootstrap leaves these bytes alone). */
struct grow_tag {
  uint64_t magic;
  uint64_t parent_hash;
  int32_t parent_nranks;
  int32_t pad;
};
#define GROW_MAGIC 0x5745465447524f57ull /* "WEFTGROW" */
#define GROW_TAG_OFFSET (NCCL_UNIQUE_ID_BYTES - sizeof(struct grow_tag))
_Static_assert(GROW_TAG_OFFSET >= WEFT_BOOTSTRAP_ID_BYTES,
               "the grow tag must not overlap the bootstrap's bytes");

static struct grow_tag tag_of(const ncclUniqueId* id) {
  struct grow_tag t;
  memcpy(&t, id->internal + GROW_TAG_OFFSET, sizeof(t));
  return t;
}

WEFT_API(ncclResult_t, ncclCommGetUniqueId, ncclComm_t comm, ncclUniqueId* uniqueId) {
  WEFT_CHECK(weft_comm_check(comm, "ncclCommGetUniqueId"));
  WEFT_ARG_CHECK(uniqueId != NULL, "ncclCommGetUniqueId: uniqueId is NULL (comm %p rank %d)", (void*)comm,
                 comm->ctx.rank);
  if (comm->grow_id_pending) {
    WEFT_WARN(
        "ncclCommGetUniqueId: comm %p rank %d already handed out an id that no ncclCommGrow has used "
        "yet; grow with that one first",
        (void*)comm, comm->ctx.rank);
    return ncclInvalidUsage;
  }
  ncclUniqueId id;
  WEFT_CHECK(weft_bootstrap_get_unique_id(&id));
  struct grow_tag t = {
      .magic = GROW_MAGIC, .parent_hash = comm->ctx.comm_hash, .parent_nranks = comm->ctx.nranks};
  memcpy(id.internal + GROW_TAG_OFFSET, &t, sizeof(t));
  comm->grow_id = id;
  comm->grow_id_pending = 1;
  *uniqueId = id;
  return ncclSuccess;
}

/* What each existing rank brings to the grow; the coordinator brings the id. */
struct grow_offer {
  int32_t has_id;
  int32_t nranks;
  ncclUniqueId id;
};

struct grow_job {
  struct weft_async_job base;
  struct ncclComm* parent;
  struct grow_offer mine;
};

/* Exactly one existing rank passes the id, and all ask for the same size. */
static ncclResult_t pick_id(const struct grow_offer* all, int n, ncclUniqueId* id, int* coordinator) {
  *coordinator = -1;
  for (int r = 0; r < n; r++) {
    if (all[r].nranks != all[0].nranks) {
      WEFT_WARN("ncclCommGrow: existing ranks disagree on nRanks: rank 0 passed %d, rank %d passed %d",
                all[0].nranks, r, all[r].nranks);
      return ncclInvalidUsage;
    }
    if (!all[r].has_id) continue;
    if (*coordinator >= 0) {
      WEFT_WARN(
          "ncclCommGrow: existing ranks %d and %d both passed a uniqueId; only the rank that called "
          "ncclCommGetUniqueId does, the others pass NULL",
          *coordinator, r);
      return ncclInvalidUsage;
    }
    *coordinator = r;
  }
  if (*coordinator < 0) {
    WEFT_WARN(
        "ncclCommGrow: no existing rank passed the uniqueId; the rank that called ncclCommGetUniqueId "
        "must pass it");
    return ncclInvalidUsage;
  }
  *id = all[*coordinator].id;
  return ncclSuccess;
}

static ncclResult_t grow_run(struct weft_async_job* base) {
  struct grow_job* job = (struct grow_job*)base;
  struct ncclComm* parent = job->parent;
  struct grow_offer* all = calloc(parent->ctx.nranks, sizeof(*all));
  if (all == NULL) return ncclSystemError;
  all[parent->ctx.rank] = job->mine;
  ncclResult_t res = weft_bootstrap_allgather(parent->ctx.bootstrap, all, sizeof(*all));
  ncclUniqueId id;
  int coordinator = -1;
  if (res == ncclSuccess) res = pick_id(all, parent->ctx.nranks, &id, &coordinator);
  free(all);
  if (res != ncclSuccess) return res;
  /* The id's root serves one job: this grow uses it up, whatever its outcome. */
  if (coordinator == parent->ctx.rank) parent->grow_id_pending = 0;
  WEFT_INFO(WEFT_INIT, "comm %p grows comm %p of %d ranks to %d (id from rank %d), keeping rank %d",
            (void*)base->comm, (void*)parent, parent->ctx.nranks, base->comm->ctx.nranks, coordinator,
            parent->ctx.rank);
  return weft_comm_setup(base->comm, &id, 1, NULL, NULL);
}

static ncclResult_t grow_existing(struct ncclComm* comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                                  ncclComm_t* newcomm, ncclConfig_t* config) {
  WEFT_CHECK(weft_comm_check(comm, "ncclCommGrow"));
  WEFT_ARG_CHECK(rank == -1,
                 "ncclCommGrow: rank %d: an existing rank passes -1 and keeps its rank %d (comm %p)", rank,
                 comm->ctx.rank, (void*)comm);
  WEFT_ARG_CHECK(nRanks > comm->ctx.nranks,
                 "ncclCommGrow: nRanks %d must be greater than the comm's %d ranks (comm %p rank %d)", nRanks,
                 comm->ctx.nranks, (void*)comm, comm->ctx.rank);
  WEFT_ARG_CHECK(
      uniqueId == NULL || (comm->grow_id_pending && memcmp(uniqueId, &comm->grow_id, sizeof(*uniqueId)) == 0),
      "ncclCommGrow: uniqueId is not the unused one ncclCommGetUniqueId returned for comm %p (rank %d); "
      "existing ranks other than that one pass NULL",
      (void*)comm, comm->ctx.rank);
  struct ncclComm* child = NULL;
  WEFT_CHECK(weft_child_alloc(comm, comm->ctx.rank, nRanks, config, &child));
  struct grow_job* job = calloc(1, sizeof(*job));
  if (job == NULL) {
    weft_comm_free(child);
    return ncclSystemError;
  }
  *job = (struct grow_job){.base = {.run = grow_run, .done = weft_child_done, .comm = child},
                           .parent = comm,
                           .mine = {.has_id = uniqueId != NULL, .nranks = nRanks}};
  if (uniqueId != NULL) job->mine.id = *uniqueId;
  return weft_child_start(&job->base, newcomm);
}

/* A new rank joins by the id like ncclCommInitRankConfig, once the id's tag says it may. */
static ncclResult_t grow_new(int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                             ncclConfig_t* config) {
  WEFT_ARG_CHECK(
      uniqueId != NULL,
      "ncclCommGrow: uniqueId is NULL with comm NULL: a new rank needs the id from ncclCommGetUniqueId");
  struct grow_tag t = tag_of(uniqueId);
  WEFT_ARG_CHECK(t.magic == GROW_MAGIC,
                 "ncclCommGrow: uniqueId did not come from ncclCommGetUniqueId (tag 0x%llx); an id of "
                 "ncclGetUniqueId starts a new comm with ncclCommInitRank",
                 (unsigned long long)t.magic);
  WEFT_ARG_CHECK(nRanks > t.parent_nranks,
                 "ncclCommGrow: nRanks %d must be greater than the grown comm's %d ranks", nRanks,
                 t.parent_nranks);
  WEFT_ARG_CHECK(rank >= t.parent_nranks && rank < nRanks,
                 "ncclCommGrow: rank %d: a new rank takes one of %d..%d (the existing ranks keep 0..%d)",
                 rank, t.parent_nranks, nRanks - 1, t.parent_nranks - 1);
  WEFT_INFO(WEFT_INIT, "ncclCommGrow: new rank %d joins comm 0x%llx of %d ranks, growing to %d", rank,
            (unsigned long long)t.parent_hash, t.parent_nranks, nRanks);
  return weft_comm_init_rank(newcomm, nRanks, uniqueId, rank, config);
}

WEFT_API(ncclResult_t, ncclCommGrow, ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
         ncclComm_t* newcomm, ncclConfig_t* config) {
  WEFT_ARG_CHECK(newcomm != NULL, "ncclCommGrow: newcomm is NULL");
  *newcomm = NULL;
  if (comm == NULL) return grow_new(nRanks, uniqueId, rank, newcomm, config);
  return grow_existing(comm, nRanks, uniqueId, rank, newcomm, config);
}
