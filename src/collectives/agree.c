/* Settings every rank of a communicator must share. Each rank reads its own environment, and a
 * ring whose ranks cut steps of different sizes, or pick different protocols, channels or
 * algorithms for the same call, waits for data that never comes. NCCL leaves mismatched
 * settings undefined; Weft agrees on them once at init: the smallest step and channel count any
 * rank can take, and rank 0's algorithm, protocol and channel bounds (with a WARN on each rank
 * whose own settings differ). Per-call configs are compared when they change (at the end). */
#include "collectives/agree.h"

#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "collectives/coll_config.h"
#include "collectives/context.h"
#include "collectives/tuner.h"
#include "transport/connector.h"
#include "util/check.h"
#include "util/log.h"
#include "util/param.h"

struct rank_settings {
  uint64_t simple_step, ll_slot; /* the largest steps this rank's connectors hold */
  uint64_t tuner;                /* weft_tuner_identity: which plugin file and version, 0 none */
  int32_t nchannels;
  int32_t min_channels, max_channels;
  uint8_t ring_ok, tree_ok, ll_ok, simple_ok;
  uint8_t deterministic, pad[3];
};

/* Across hosts a Simple step carries less than a slot: WEFT_NET_CHUNKSIZE, by default 64 KiB per
 * host. Short steps let a rank reduce or copy one step while the next is on the wire, which pays
 * most in small rings; each step also costs wake-ups and system calls, which dominate in larger
 * ones (measured in docs/PERFORMANCE.md). */
static size_t net_step_limit(const struct weft_comm_ctx* comm) {
  if (comm->nnodes < 2) return SIZE_MAX;
  int64_t chunk = weft_param_is_set("WEFT_NET_CHUNKSIZE") ? weft_param_int("WEFT_NET_CHUNKSIZE")
                                                          : (int64_t)comm->nnodes * 64 * 1024;
  chunk = chunk / 4096 * 4096;
  return chunk > 0 ? (size_t)chunk : SIZE_MAX;
}

static struct rank_settings mine(const struct weft_comm_ctx* comm, const struct weft_plan_params* pp,
                                 size_t simple_bytes, size_t ll_bytes) {
  size_t step = weft_conn_slot_bytes(simple_bytes), limit = net_step_limit(comm);
  return (struct rank_settings){.simple_step = step < limit ? step : limit,
                                .ll_slot = weft_conn_slot_bytes(ll_bytes),
                                .tuner = weft_tuner_identity(comm->tuner),
                                .nchannels = pp->nchannels,
                                .min_channels = pp->min_channels,
                                .max_channels = pp->max_channels,
                                .ring_ok = (uint8_t)pp->ring_ok,
                                .tree_ok = (uint8_t)pp->tree_ok,
                                .ll_ok = (uint8_t)pp->ll_ok,
                                .simple_ok = (uint8_t)pp->simple_ok,
                                .deterministic = (uint8_t)pp->deterministic};
}

static int same_choices(const struct rank_settings* a, const struct rank_settings* b) {
  return a->min_channels == b->min_channels && a->max_channels == b->max_channels &&
         a->ring_ok == b->ring_ok && a->tree_ok == b->tree_ok && a->ll_ok == b->ll_ok &&
         a->simple_ok == b->simple_ok;
}

/* A tuner plugin decides for every rank only if every rank has the same one (NCCL assumes so, and
 * ranks that choose differently hang): otherwise no rank uses it. */
static void agree_tuner(struct weft_comm_ctx* comm, struct weft_plan_params* pp,
                        const struct rank_settings* all) {
  int r = 0;
  while (r < comm->nranks && all[r].tuner == all[0].tuner) r++;
  if (r == comm->nranks) return;
  WEFT_WARN(
      "Rank %d: ranks %d and %d did not load the same tuner plugin (NCCL_TUNER_PLUGIN, this rank: %s); no "
      "rank "
      "of this communicator uses one",
      comm->rank, 0, r, weft_tuner_label(comm->tuner));
  weft_tuner_destroy(comm->tuner);
  comm->tuner = NULL;
  pp->tuner = NULL;
}

ncclResult_t weft_plan_agree(struct weft_comm_ctx* comm, struct weft_plan_params* pp, size_t simple_bytes,
                             size_t ll_bytes) {
  struct rank_settings me = mine(comm, pp, simple_bytes, ll_bytes);
  pp->simple_slot = me.simple_step;
  pp->ll_slot = me.ll_slot;
  pp->tuner = comm->tuner;
  if (comm->nranks < 2) return ncclSuccess;
  struct rank_settings* all = calloc((size_t)comm->nranks, sizeof(*all));
  if (all == NULL) return ncclSystemError;
  all[comm->rank] = me;
  ncclResult_t res = weft_bootstrap_allgather(comm->bootstrap, all, sizeof(*all));
  if (res != ncclSuccess) {
    free(all);
    return res;
  }
  for (int r = 0; r < comm->nranks; r++) {
    if (all[r].deterministic != me.deterministic) {
      /* Its rings differ from ours (graph/connect.c): no following rank 0 can mend that. */
      WEFT_WARN("Rank %d: WEFT_DETERMINISTIC is %d here but %d on rank %d; set it alike on every rank",
                comm->rank, me.deterministic, all[r].deterministic, r);
      free(all);
      return ncclInvalidUsage;
    }
    if (all[r].simple_step < pp->simple_slot) pp->simple_slot = all[r].simple_step;
    if (all[r].ll_slot < pp->ll_slot) pp->ll_slot = all[r].ll_slot;
    if (all[r].nchannels < pp->nchannels) pp->nchannels = all[r].nchannels;
  }
  if (!same_choices(&me, &all[0]))
    WEFT_WARN(
        "Rank %d: NCCL_ALGO, NCCL_PROTO or NCCL_MIN/MAX_NCHANNELS differ from rank 0's; this communicator "
        "follows rank 0 (Ring %s, Tree %s, Simple %s, LL %s, channels %d..%d; 0: unset)",
        comm->rank, all[0].ring_ok ? "on" : "off", all[0].tree_ok ? "on" : "off",
        all[0].simple_ok ? "on" : "off", all[0].ll_ok ? "on" : "off", (int)all[0].min_channels,
        (int)all[0].max_channels);
  agree_tuner(comm, pp, all);
  pp->ring_ok = all[0].ring_ok;
  pp->tree_ok = all[0].tree_ok;
  pp->ll_ok = all[0].ll_ok;
  pp->simple_ok = all[0].simple_ok;
  pp->min_channels = all[0].min_channels;
  pp->max_channels = all[0].max_channels;
  if (pp->simple_slot != me.simple_step || pp->ll_slot != me.ll_slot || pp->nchannels != me.nchannels)
    WEFT_INFO(WEFT_INIT,
              "Rank %d: ranks' buffer sizes or channel counts differ; every rank uses Simple steps of %zu "
              "bytes, LL slots of %zu bytes and %d channel(s)",
              comm->rank, pp->simple_slot, pp->ll_slot, pp->nchannels);
  free(all);
  return ncclSuccess;
}

/* Per-call selections. Ranks that plan one collective differently (another algorithm, protocol
 * or channel count) wait for each other forever or exchange misplaced data, and a config, unlike
 * the environment, may change from call to call. So before a launch in which some collective's
 * selection differs from the one the ranks last agreed on, the ranks compare the whole sequence;
 * every rank given the same configs makes the same decision, so all of them take part. A rank
 * whose selection did not change while another's did does not take part: the other then waits
 * until WEFT_BOOTSTRAP_TIMEOUT and fails, which ends in errors too, only later. */
struct calls_summary {
  uint64_t hash;  /* of the sequence of selections */
  uint64_t first; /* the first selection that differs from the agreed one */
  uint64_t seq;   /* its call */
  int32_t ncoll;
  int32_t pad;
};

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Returns whether a selection changes; *last is the one the launch ends with. */
static int summarize_calls(const struct weft_comm_ctx* comm, const struct weft_task* tasks,
                           struct calls_summary* s, uint64_t* last) {
  uint64_t cur = comm->sel_agreed;
  int changed = 0;
  memset(s, 0, sizeof(*s));
  for (const struct weft_task* t = tasks; t; t = t->next) {
    if (t->coll == WEFT_COLL_SEND || t->coll == WEFT_COLL_RECV) continue;
    s->ncoll++;
    s->hash = mix(s->hash ^ t->opts.sig);
    if (!changed && t->opts.sig != cur) {
      changed = 1;
      s->first = t->opts.sig;
      s->seq = t->seq;
    }
    cur = t->opts.sig;
  }
  *last = cur;
  return changed;
}

static void warn_calls(const struct weft_comm_ctx* comm, const struct calls_summary* all, int bad) {
  char a[192], b[192];
  weft_coll_sel_text(all[0].first, a, sizeof(a));
  weft_coll_sel_text(all[bad].first, b, sizeof(b));
  WEFT_WARN(
      "Rank %d: the per-call configs (nccl*Config) of a group differ between ranks, so they would run its "
      "collectives differently; nothing of the group ran: rank 0 has %d collective(s), the first new "
      "selection "
      "(seq %llu) %s; rank %d has %d, the first new one (seq %llu) %s",
      comm->rank, (int)all[0].ncoll, (unsigned long long)all[0].seq, a, bad, (int)all[bad].ncoll,
      (unsigned long long)all[bad].seq, b);
}

ncclResult_t weft_plan_agree_calls(struct weft_comm_ctx* comm, const struct weft_task* tasks) {
  struct calls_summary me;
  uint64_t last;
  if (!summarize_calls(comm, tasks, &me, &last) || comm->nranks < 2) {
    comm->sel_agreed = last;
    return ncclSuccess;
  }
  struct calls_summary* all = calloc((size_t)comm->nranks, sizeof(*all));
  if (all == NULL) return ncclSystemError;
  all[comm->rank] = me;
  ncclResult_t res = weft_bootstrap_allgather(comm->bootstrap, all, sizeof(*all));
  if (res != ncclSuccess) {
    WEFT_WARN(
        "Rank %d: agreeing on the per-call configs (nccl*Config) of seq %llu with the other ranks failed; "
        "ranks "
        "that run this group without the same configs leave the others waiting here",
        comm->rank, (unsigned long long)me.seq);
    free(all);
    return res;
  }
  int bad = 0;
  for (int r = 1; r < comm->nranks && bad == 0; r++)
    if (all[r].hash != all[0].hash || all[r].ncoll != all[0].ncoll) bad = r;
  if (bad) {
    warn_calls(comm, all, bad);
    res = ncclInvalidUsage;
  } else {
    comm->sel_agreed = last;
  }
  free(all);
  return res;
}
