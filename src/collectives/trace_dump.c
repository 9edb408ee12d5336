/* The flight recorder's dump: one JSON file per rank, written to a temporary name and renamed, so
 * a reader never sees half a file. tools/weft-trace reads these files; keep the two in step. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "collectives/context.h"
#include "collectives/trace.h"
#include "util/json.h"
#include "util/log.h"
#include "util/param.h"

static const char* const reason_names[] = {"failure", "abort", "signal", "fatal-signal", "request"};
static const char* const state_names[] = {"none", "queued", "running", "done", "failed", "launched"};
static const char* const algo_names[] = {"unknown", "ring", "tree", "direct"};
static const char* const dtype_names[] = {"int8",    "uint8",   "int32",   "uint32",   "int64",  "uint64",
                                          "float16", "float32", "float64", "bfloat16", "f8e4m3", "f8e5m2"};
static const char* const redop_names[] = {"sum", "prod", "max", "min", "avg"};

static const char* name_of(const char* const* names, size_t n, unsigned v, const char* other) {
  return v < n ? names[v] : other;
}
#define NAME(tab, v, other) name_of(tab, sizeof(tab) / sizeof(tab[0]), (unsigned)(v), other)

static unsigned long long wall(const struct weft_trace_clock* clk, uint64_t ticks) {
  return (unsigned long long)weft_trace_wall(clk, ticks);
}

static const char* proto_name(unsigned p) { return p == 0 ? "LL" : p == 1 ? "Simple" : "unknown"; }

static void put_rec(FILE* f, const struct weft_trace_rec* r, const struct weft_trace_clock* clk) {
  char redop[16];
  if (r->redop == 0xff)
    snprintf(redop, sizeof(redop), "none");
  else if (r->redop < 5)
    snprintf(redop, sizeof(redop), "%s", redop_names[r->redop]);
  else
    snprintf(redop, sizeof(redop), "user%u", r->redop);
  fprintf(f, "    {\"seq\": %llu, \"coll_no\": %llu, \"op\": ", (unsigned long long)r->seq,
          (unsigned long long)r->coll_no);
  weft_json_string(f, weft_coll_name(r->coll));
  fprintf(f, ", \"count\": %llu, \"dtype\": \"%s\", \"redop\": \"%s\", \"root\": %d,\n",
          (unsigned long long)r->count, NAME(dtype_names, r->dtype, "?"), redop, (int)r->root);
  fprintf(f, "     \"algo\": \"%s\", \"proto\": \"%s\", \"channels\": %u, \"stream\": \"0x%llx\",\n",
          NAME(algo_names, r->algo, "?"), proto_name(r->proto), r->channels, (unsigned long long)r->stream);
  fprintf(f,
          "     \"enqueued_ns\": %llu, \"started_ns\": %llu, \"finished_ns\": %llu, \"state\": \"%s\", "
          "\"result\": %d}",
          wall(clk, r->t_enqueued), wall(clk, r->t_started), wall(clk, r->t_finished),
          NAME(state_names, r->state, "?"), (int)r->result);
}

/* Oldest first: the slots after the newest one, then those up to it. */
static void put_ops(FILE* f, const struct weft_trace* tr, const struct weft_trace_clock* clk) {
  uint64_t newest = 0;
  int any = 0;
  for (uint32_t i = 0; i < tr->size; i++)
    if (tr->ring[i].state != 0 && (!any || tr->ring[i].seq > newest)) newest = tr->ring[i].seq, any = 1;
  fprintf(f, "  \"ops\": [");
  int first = 1;
  for (uint64_t k = 0; any && k < tr->size; k++) {
    uint64_t seq = newest + 1 + k; /* walks the ring once from the oldest slot */
    const struct weft_trace_rec* r = weft_trace_slot(tr, seq);
    if (r->state == 0 || r->seq > newest || r->seq + tr->size <= newest) continue;
    fprintf(f, first ? "\n" : ",\n");
    put_rec(f, r, clk);
    first = 0;
  }
  fprintf(f, "\n  ],\n");
}

static const char* const dev_wait_names[] = {"", "data from the peer", "LL data from the peer",
                                             "a free slot at the peer"};

/* CUDA: the oldest launched record the kernel has not finished (RUNNING: being launched), + 1. */
static uint64_t dev_inflight(const struct weft_trace* tr) {
  uint64_t from = __atomic_load_n(&tr->dev_done, __ATOMIC_ACQUIRE);
  for (uint64_t seq = from; seq < from + tr->size; seq++) {
    const struct weft_trace_rec* r = weft_trace_slot(tr, seq);
    uint8_t st = __atomic_load_n(&r->state, __ATOMIC_ACQUIRE);
    if (r->seq != seq || st == 0) return 0;
    if (st == WEFT_TRACE_RUNNING || st == WEFT_TRACE_LAUNCHED || st == WEFT_TRACE_FAILED) return seq + 1;
  }
  return 0;
}

/* The progress a CUDA kernel reported (collectives/progress.h), per block: the op it runs, the
 * steps it passed, and its wait, which began when the GPU's clock said `since`: as long before
 * the host first saw the clock at `beat` as the GPU counted between the two. The first
 * WEFT_TRACE_CHANNELS always, the others once a block ran on them. */
static void put_dev_channels(FILE* f, const struct weft_trace* tr, uint64_t ref,
                             const struct weft_trace_clock* clk) {
  for (int c = 0; c < WEFT_PROGRESS_SLOTS; c++) {
    const struct weft_progress_chan* pc = &tr->dev->chan[c];
    uint64_t op = __atomic_load_n(&pc->op, __ATOMIC_RELAXED),
             steps = __atomic_load_n(&pc->steps, __ATOMIC_RELAXED);
    if (c >= WEFT_TRACE_CHANNELS && op == 0) continue;
    uint64_t wait = __atomic_load_n(&pc->wait, __ATOMIC_RELAXED),
             since = __atomic_load_n(&pc->since, __ATOMIC_RELAXED);
    uint64_t beat = __atomic_load_n(&tr->dev_seen[c].beat, __ATOMIC_RELAXED);
    uint64_t seen = __atomic_load_n(&tr->dev_seen[c].seen, __ATOMIC_RELAXED), at = 0;
    if (wait != 0 && seen != 0)
      at = seen - (beat >= since ? (uint64_t)((double)(beat - since) / clk->ns_per_tick) : 0);
    fprintf(f, "%s\n    {\"channel\": %d, \"seq\": ", c ? "," : "", c);
    if (op == 0)
      fprintf(f, "null");
    else
      fprintf(f, "%llu", (unsigned long long)weft_trace_dev_seq(ref, (uint32_t)(op - 1)));
    fprintf(
        f,
        ", \"steps\": %llu, \"waiting\": %s, \"peer\": %d, \"since_ns\": %llu, \"peer_steps\": 0, \"what\": ",
        (unsigned long long)steps, wait ? "true" : "false", wait ? (int)(wait >> 8) - 1 : -1, wall(clk, at));
    weft_json_string(f, dev_wait_names[(wait & 0xff) < 4 ? wait & 0xff : 0]);
    fprintf(f, "}");
  }
}

static void put_inflight(FILE* f, const struct weft_trace* tr, const struct weft_trace_clock* clk) {
  uint64_t inflight = tr->dev ? dev_inflight(tr) : __atomic_load_n(&tr->inflight, __ATOMIC_ACQUIRE);
  if (inflight == 0) {
    fprintf(f, "  \"in_flight\": null\n");
    return;
  }
  fprintf(f, "  \"in_flight\": {\"seq\": %llu, \"channels\": [", (unsigned long long)(inflight - 1));
  if (tr->dev) {
    put_dev_channels(f, tr, inflight - 1, clk);
    fprintf(f, "\n  ]}\n");
    return;
  }
  for (int c = 0; c < WEFT_TRACE_CHANNELS; c++) {
    const struct weft_trace_chan* ch = &tr->chan[c];
    fprintf(f,
            "%s\n    {\"channel\": %d, \"steps\": %llu, \"waiting\": %s, \"peer\": %d, \"since_ns\": %llu, ",
            c ? "," : "", c, (unsigned long long)ch->steps, ch->waiting ? "true" : "false", (int)ch->peer,
            wall(clk, ch->since));
    fprintf(f, "\"peer_steps\": %llu, \"what\": ", (unsigned long long)ch->peer_steps);
    weft_json_string(f, ch->what ? ch->what : "");
    fprintf(f, "}");
  }
  fprintf(f, "\n  ]}\n");
}

static void put_header(FILE* f, const struct weft_comm_ctx* comm, const struct weft_trace* tr,
                       enum weft_trace_reason why, const struct weft_trace_clock* clk) {
  const struct weft_peer_info* me = &comm->peers[comm->rank];
  fprintf(f, "{\n  \"weft_trace\": 1,\n  \"comm_hash\": \"%016llx\",\n  \"rank\": %d,\n  \"nranks\": %d,\n",
          (unsigned long long)comm->comm_hash, comm->rank, comm->nranks);
  fprintf(f, "  \"host\": ");
  weft_json_string(f, me->host_name);
  fprintf(f, ",\n  \"pid\": %d,\n  \"backend\": \"%s\",\n  \"reason\": \"%s\",\n  \"time_ns\": %llu,\n",
          (int)getpid(), comm->backend == WEFT_BACKEND_CUDA ? "cuda" : "host", NAME(reason_names, why, "?"),
          (unsigned long long)clk->wall_now);
  fprintf(f, "  \"buffer\": %u,\n  \"async_error\": %d,\n", tr->size,
          (int)__atomic_load_n(&comm->async_result, __ATOMIC_ACQUIRE));
  struct weft_cause c;
  if (weft_cause_get(&comm->cause, &c) && c.kind != WEFT_CAUSE_MISMATCH) {
    fprintf(f, "  \"cause\": {\"rank\": %d, \"host\": ", (int)c.rank);
    weft_json_string(f, c.host);
    fprintf(f, ", \"kind\": \"%s\"},\n", c.kind == WEFT_CAUSE_LEFT ? "left" : "lost");
  } else {
    fprintf(f, "  \"cause\": null,\n");
  }
  fprintf(f, "  \"peers\": [");
  for (int p = 0; p < comm->nranks; p++) {
    fprintf(f, "%s{\"rank\": %d, \"host\": ", p ? ", " : "", p);
    weft_json_string(f, comm->peers[p].host_name);
    fprintf(f, ", \"host_id\": \"%016llx\", \"pid\": %d}", (unsigned long long)comm->peers[p].host_hash,
            comm->peers[p].pid);
  }
  fprintf(f, "],\n");
}

/* Host names may hold characters a file name should not. */
static void safe_name(char* out, size_t size, const char* s) {
  size_t i = 0;
  for (; s && *s && i + 1 < size; s++)
    out[i++] = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
                       *s == '-' || *s == '.'
                   ? *s
                   : '_';
  out[i] = 0;
}

ncclResult_t weft_trace_dump(struct weft_comm_ctx* comm, const char* dir, enum weft_trace_reason why,
                             int required) {
  struct weft_trace* tr = comm->trace;
  if (dir == NULL) dir = weft_param_str("WEFT_TRACE_DIR");
  if (dir == NULL || dir[0] == 0) {
    if (!required) return ncclSuccess;
    WEFT_WARN("comm %p rank %d: no directory for the trace dump (path is NULL and WEFT_TRACE_DIR is unset)",
              (void*)comm, comm->rank);
    return ncclInvalidArgument;
  }
  if (tr == NULL) {
    if (required)
      WEFT_WARN("comm %p rank %d: the flight recorder is off (WEFT_TRACE_BUFFER=0): nothing to dump",
                (void*)comm, comm->rank);
    return required ? ncclInvalidUsage : ncclSuccess;
  }
  char host[64], path[4096], tmp[4200];
  safe_name(host, sizeof(host), comm->peers[comm->rank].host_name);
  snprintf(path, sizeof(path), "%s/weft-trace-%016llx-r%d-%s-%d.json", dir,
           (unsigned long long)comm->comm_hash, comm->rank, host, (int)getpid());
  snprintf(tmp, sizeof(tmp), "%s/.weft-trace-%016llx-r%d-%d.%lx.tmp", dir,
           (unsigned long long)comm->comm_hash, comm->rank, (int)getpid(), (unsigned long)gettid());
  mkdir(dir, 0777); /* one level, as a convenience; an error shows at fopen */
  FILE* f = fopen(tmp, "w");
  if (f == NULL) {
    WEFT_WARN("comm %p rank %d: cannot write the trace dump %s: %s", (void*)comm, comm->rank, tmp,
              strerror(errno));
    return ncclSystemError;
  }
  weft_trace_dev_observe(tr); /* CUDA: what the kernels did up to now */
  struct weft_trace_clock clk;
  weft_trace_clock_now(&clk);
  put_header(f, comm, tr, why, &clk);
  put_ops(f, tr, &clk);
  put_inflight(f, tr, &clk);
  fprintf(f, "}\n");
  int bad = ferror(f);
  bad |= fclose(f) != 0;
  if (bad || rename(tmp, path) != 0) {
    WEFT_WARN("comm %p rank %d: writing the trace dump %s failed: %s", (void*)comm, comm->rank, path,
              strerror(errno));
    unlink(tmp);
    return ncclSystemError;
  }
  if (why == WEFT_TRACE_ON_FAILURE) tr->failure_dumped = 1;
  WEFT_INFO(WEFT_INIT, "comm %p rank %d: flight recorder dumped (%s) to %s", (void*)comm, comm->rank,
            NAME(reason_names, why, "?"), path);
  return ncclSuccess;
}
