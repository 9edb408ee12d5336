/* Direct paths' setup and per-operation protocol: boards (one per rank, mapped by every peer),
 * descriptors of the operation's buffers, the cache of peers' ncclMemAlloc segments, and the
 * decision between the small exchange, zero-copy and the ring. The data movement itself is in
 * direct_ops.c. */
#include "collectives/host/direct.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "collectives/context.h"
#include "collectives/host/direct_impl.h"
#include "collectives/mem.h"
#include "collectives/profiler.h"
#include "util/check.h"
#include "util/log.h"
#include "util/param.h"

struct board_info {
  int32_t pid, fd, ok, check, direct;
  uint64_t size;
  uint64_t addr; /* where the board is in the owner's process */
};

_Static_assert(sizeof(cpu_set_t) == sizeof(((struct weft_board*)0)->cpus), "a board holds a cpu_set_t");

/* The CPUs this thread may run on (every CPU online when the kernel does not say). */
static void note_cpus(struct weft_board* b) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    CPU_ZERO(&set);
    for (long c = 0, n = sysconf(_SC_NPROCESSORS_ONLN); c < n && c < CPU_SETSIZE; c++) CPU_SET(c, &set);
  }
  memcpy(b->cpus, &set, sizeof(set));
}

/* How many CPUs the ranks may run on together. Counting only this rank's CPUs took ranks bound
 * to a core each (as mpirun and Slurm bind them) for oversubscribed: every wait yielded and a
 * 2-rank 8 B all-reduce took 0.5-0.7 us where unbound ranks took 0.18. */
static int cpus_of_ranks(const struct weft_direct* d) {
  cpu_set_t all, one;
  CPU_ZERO(&all);
  for (int p = 0; p < d->nranks; p++) {
    memcpy(&one, d->boards[p]->cpus, sizeof(one));
    CPU_OR(&all, &all, &one);
  }
  return CPU_COUNT(&all) > 0 ? CPU_COUNT(&all) : 1;
}

/* Own board: shared memory from the ncclMemAlloc registry, touched now (first touch is slow).
 * Ranks of this process use it in place, so it lives until the last of them lets it go. */
static int make_board(struct weft_direct* d, struct board_info* info) {
  void* p = NULL;
  struct weft_mem_seg seg;
  if (weft_mem_alloc_shared(sizeof(struct weft_board), &p) != ncclSuccess) return 0;
  memset(p, 0, sizeof(struct weft_board));
  ((struct weft_board*)p)->cpu = -1;
  note_cpus(p);
  if (weft_mem_lookup(p, sizeof(struct weft_board), &seg) != ncclSuccess) {
    ncclMemFree(p);
    return 0;
  }
  d->mine = p;
  for (int r = 0; r < d->nranks; r++) d->mine->refs += d->same_proc[r] || r == d->rank;
  info->pid = (int32_t)seg.pid;
  info->fd = seg.fd;
  info->size = seg.size;
  info->addr = (uint64_t)(uintptr_t)p;
  return 1;
}

static void release_board(struct weft_board* b) {
  if (__atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0) ncclMemFree(b);
}

/* Peers' boards: a peer of this process is used where it is (n thread ranks mapping each
 * other's boards would take n^2 of the process's mappings, past vm.max_map_count at a few
 * hundred ranks); other processes' boards are mapped. */
static int map_boards(struct weft_direct* d, const struct board_info* infos) {
  for (int p = 0; p < d->nranks; p++) {
    if (p == d->rank) {
      d->boards[p] = d->mine;
      continue;
    }
    if (d->same_proc[p]) {
      d->boards[p] = (struct weft_board*)(uintptr_t)infos[p].addr;
      continue;
    }
    void* base;
    if (weft_mem_map_peer(infos[p].pid, infos[p].fd, infos[p].size, &base) != ncclSuccess) return 0;
    d->boards[p] = base;
    d->board_sizes[p] = infos[p].size;
  }
  return 1;
}

static ncclResult_t alloc_state(struct weft_comm_ctx* comm, struct weft_direct** out) {
  struct weft_direct* d = calloc(1, sizeof(*d));
  if (d == NULL) return ncclSystemError;
  *out = d;
  int k = comm->nranks;
  d->nranks = k;
  d->rank = comm->rank;
  d->boards = calloc(k, sizeof(*d->boards));
  d->board_sizes = calloc(k, sizeof(*d->board_sizes));
  d->same_proc = calloc(k, sizeof(*d->same_proc));
  d->cache = calloc((size_t)k * WEFT_DIRECT_CACHE_WAYS, sizeof(*d->cache));
  d->in = calloc(k, sizeof(*d->in));
  d->out = calloc(k, sizeof(*d->out));
  if (posix_memalign(&d->tmp, 4096, WEFT_DIRECT_CHUNK) != 0) d->tmp = NULL;
  if (!d->boards || !d->board_sizes || !d->same_proc || !d->cache || !d->in || !d->out || !d->tmp) {
    WEFT_WARN("comm %p rank %d: out of memory for the direct paths' state", (void*)comm, comm->rank);
    return ncclSystemError;
  }
  d->all_same_proc = 1;
  for (int p = 0; p < k; p++) {
    d->same_proc[p] = weft_comm_same_process(comm, p);
    d->all_same_proc &= d->same_proc[p];
  }
  /* A tuner plugin, like NCCL_ALGO / NCCL_PROTO, decides every collective: the planner asks it. */
  d->forced = weft_param_is_set("NCCL_ALGO") || weft_param_is_set("NCCL_PROTO") || comm->tuner != NULL;
  return ncclSuccess;
}

ncclResult_t weft_host_direct_init(struct weft_comm_ctx* comm, struct weft_direct** out) {
  *out = NULL;
  int k = comm->nranks;
  if (k < 2 || comm->local_nranks != k) return ncclSuccess;
  struct weft_direct* d = NULL;
  struct board_info* infos = calloc(k, sizeof(*infos));
  ncclResult_t res = infos ? alloc_state(comm, &d) : ncclSystemError;
  WEFT_CHECK_GOTO(res, res, fail);
  struct board_info* me = &infos[comm->rank];
  /* WEFT_DIRECT=0 turns the data paths off; the boards stay for the fingerprint comparison. */
  me->direct = weft_param_int("WEFT_DIRECT") != 0;
  me->check = weft_param_int("WEFT_CHECK_CALLS") != 0;
  me->ok = (me->direct || me->check) && make_board(d, me);
  WEFT_CHECK_GOTO(weft_bootstrap_allgather(comm->bootstrap, infos, sizeof(*infos)), res, fail);
  int ok = 1;
  d->check = d->enabled = 1; /* every rank must take part, or none */
  for (int p = 0; p < k; p++) ok &= infos[p].ok, d->check &= infos[p].check, d->enabled &= infos[p].direct;
  if (!ok && d->mine) d->mine->refs = 1; /* no peer will take it */
  /* Agree on whether every rank mapped every board: the paths need all of them. */
  me->ok = ok && map_boards(d, infos);
  WEFT_CHECK_GOTO(weft_bootstrap_allgather(comm->bootstrap, infos, sizeof(*infos)), res, fail);
  for (int p = 0; p < k; p++) ok &= infos[p].ok;
  free(infos);
  infos = NULL;
  if (!ok) {
    WEFT_INFO(WEFT_INIT,
              "comm %p rank %d: shared boards off (WEFT_DIRECT=0 with WEFT_CHECK_CALLS=0, or a "
              "board could not be mapped)",
              (void*)comm, comm->rank);
    weft_host_direct_fini(d);
    return ncclSuccess;
  }
  int cpus = cpus_of_ranks(d);
  d->oversub = k > cpus;
  WEFT_INFO(WEFT_INIT, "comm %p rank %d: direct paths %s, %d ranks on %d CPUs%s, %s, calls %scompared",
            (void*)comm, comm->rank, d->enabled ? "on" : "off (boards compare calls only)", k, cpus,
            d->oversub ? " (oversubscribed: waits yield)" : "",
            d->all_same_proc ? "one process" : "ncclMemAlloc buffers shared across processes",
            d->check ? "" : "not ");
  *out = d;
  return ncclSuccess;
fail:
  free(infos);
  weft_host_direct_fini(d);
  return res;
}

void weft_host_direct_fini(struct weft_direct* d) {
  if (d == NULL) return;
  for (int p = 0; d->boards && p < d->nranks; p++) {
    if (p == d->rank || d->boards[p] == NULL) continue;
    if (d->same_proc[p])
      release_board(d->boards[p]);
    else
      weft_mem_unmap(d->boards[p], d->board_sizes[p]);
  }
  for (int i = 0; d->cache && i < d->nranks * WEFT_DIRECT_CACHE_WAYS; i++)
    weft_mem_unmap(d->cache[i].base, d->cache[i].size);
  if (d->mine) release_board(d->mine);
  free(d->boards);
  free(d->board_sizes);
  free(d->same_proc);
  free(d->cache);
  free(d->in);
  free(d->out);
  free(d->tmp);
  free(d);
}

/* Describe buf (bytes long) for peers: its address, and its segment when it is shared. */
static int describe(const void* buf, size_t bytes, struct weft_dbuf* b) {
  struct weft_mem_seg seg;
  memset(b, 0, sizeof(*b));
  b->addr = (uint64_t)(uintptr_t)buf;
  if (weft_mem_lookup(buf, bytes, &seg) != ncclSuccess) return 0;
  b->seg_id = seg.id;
  b->seg_size = seg.size;
  b->off = (uint64_t)((const char*)buf - (const char*)seg.base);
  b->pid = (int32_t)seg.pid;
  b->fd = seg.fd;
  return 1;
}

/* Where peer p's buffer b is mapped here: its address in this process, or a cached mapping of
 * its segment (least recently used evicted). */
static ncclResult_t resolve(struct weft_direct* d, int p, const struct weft_dbuf* b, void** ptr) {
  if (d->same_proc[p]) {
    *ptr = (void*)(uintptr_t)b->addr;
    return ncclSuccess;
  }
  struct weft_seg_map* ways = &d->cache[(size_t)p * WEFT_DIRECT_CACHE_WAYS];
  struct weft_seg_map* victim = &ways[0];
  d->clock++;
  for (int i = 0; i < WEFT_DIRECT_CACHE_WAYS; i++) {
    if (ways[i].base && ways[i].id == b->seg_id && ways[i].pid == b->pid && ways[i].size == b->seg_size) {
      ways[i].used = d->clock;
      *ptr = (char*)ways[i].base + b->off;
      return ncclSuccess;
    }
    if (ways[i].used < victim->used) victim = &ways[i];
  }
  weft_mem_unmap(victim->base, victim->size);
  memset(victim, 0, sizeof(*victim));
  void* base;
  WEFT_CHECK(weft_mem_map_peer(b->pid, b->fd, b->seg_size, &base));
  victim->base = base;
  victim->size = b->seg_size;
  victim->id = b->seg_id;
  victim->pid = b->pid;
  victim->used = d->clock;
  *ptr = (char*)base + b->off;
  return ncclSuccess;
}

struct weft_cause* weft_host_direct_cause(struct weft_direct* d, int p) {
  return d != NULL ? &d->boards[p]->cause : NULL;
}

ncclResult_t weft_direct_fail(struct weft_direct* d, ncclResult_t res) {
  __atomic_store_n(&d->mine->failed, 1, __ATOMIC_RELEASE);
  weft_host_post_counter(&d->mine->arrive, &d->mine->arrive_sleepers, d->mine->arrive);
  weft_host_post_counter(&d->mine->done, &d->mine->done_sleepers, d->mine->done);
  return res;
}

ncclResult_t weft_direct_wait_all(struct weft_direct* d, struct weft_waiter* w, int done, uint64_t seq) {
  for (int p = 0; p < d->nranks; p++) {
    if (p == d->rank) continue;
    struct weft_board* b = d->boards[p];
    ncclResult_t res = done ? weft_host_wait_counter(w, &b->done, seq, &b->done_sleepers, &b->failed, &b->cpu,
                                                     p, "the end of the step")
                            : weft_host_wait_counter(w, &b->arrive, seq, &b->arrive_sleepers, &b->failed,
                                                     &b->cpu, p, "its arrival");
    if (res != ncclSuccess) return res;
  }
  return ncclSuccess;
}

static int supported(int coll) {
  return coll == WEFT_COLL_ALLREDUCE || coll == WEFT_COLL_ALLGATHER || coll == WEFT_COLL_REDUCESCATTER ||
         coll == WEFT_COLL_BROADCAST || coll == WEFT_COLL_REDUCE;
}

ncclResult_t weft_direct_check_peer(struct weft_direct* d, int p, uint64_t seq) {
  const struct weft_board* b = d->boards[p];
  uint64_t their_seq = b->op_seq[seq & 1];
  if (!d->check || (weft_call_fp_equal(&b->fp[seq & 1], &d->fp) && their_seq == d->cur_seq))
    return ncclSuccess;
  return weft_direct_found(d, p, d->cur_seq, &d->fp, their_seq, &b->fp[seq & 1]);
}

static ncclResult_t check_all(struct weft_direct* d, uint64_t seq) {
  for (int p = 0; p < d->nranks; p++)
    if (p != d->rank) WEFT_CHECK(weft_direct_check_peer(d, p, seq));
  return ncclSuccess;
}

/* Publish this rank's call of direct operation seq (with the arrival that follows). */
static void post_fp(struct weft_direct* d, uint64_t seq) {
  d->mine->fp[seq & 1] = d->fp;
  d->mine->op_seq[seq & 1] = d->cur_seq;
  d->mine->tag[seq & 1] = d->tag;
}

/* A collective the ring runs: it only says on the board which call it is, for a peer that gets
 * an unexpected step or waits in a direct operation of the same number. No rank waits here: the
 * steps the ring exchanges carry the check (step_tag.h). */
static void record_ring(struct weft_direct* d) {
  struct weft_board* b = d->mine;
  int par = (int)(d->cur_seq & 1);
  uint64_t words[2];
  memcpy(words, &d->fp, sizeof(words));
  __atomic_store_n(&b->ring_ver[par], 2 * d->cur_seq - 1, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  __atomic_store_n(&b->ring_fp[par][0], words[0], __ATOMIC_RELAXED);
  __atomic_store_n(&b->ring_fp[par][1], words[1], __ATOMIC_RELAXED);
  __atomic_store_n(&b->ring_ver[par], 2 * d->cur_seq, __ATOMIC_RELEASE);
}

/* Describe this rank's buffers of t that its extent uses (an unused one is shareable as is). */
static void post_desc(struct weft_direct* d, const struct weft_task* t, uint64_t seq) {
  struct weft_desc* mine = &d->mine->desc[seq & 1];
  struct weft_direct_extent e;
  weft_direct_extent_of(t, d->nranks, d->rank, &e);
  memset(&mine->in, 0, sizeof(mine->in));
  memset(&mine->out, 0, sizeof(mine->out));
  int ok_in = e.in_bytes == 0 || describe(t->sendbuff, e.in_bytes, &mine->in);
  int ok_out = e.out_bytes == 0 || describe(t->recvbuff, e.out_bytes, &mine->out);
  mine->capable = d->all_same_proc || (ok_in && ok_out);
  mine->coll = (uint32_t)t->coll;
  mine->bytes = t->count * weft_dt_size(t->dtype);
  mine->root = d->fp.root;
  mine->seq = seq;
}

/* Peer p's descriptor of operation seq: this one's, of the same shape (see weft_desc). */
static int same_shape(const struct weft_desc* mine, const struct weft_desc* theirs) {
  return theirs->seq == mine->seq && theirs->coll == mine->coll && theirs->bytes == mine->bytes &&
         theirs->root == mine->root;
}

/* Map peer p's buffers that t uses there (NULL where its extent is 0). */
static ncclResult_t map_peer(struct weft_direct* d, const struct weft_task* t, int p, uint64_t seq) {
  const struct weft_desc* desc = &d->boards[p]->desc[seq & 1];
  struct weft_direct_extent e;
  weft_direct_extent_of(t, d->nranks, p, &e);
  void* in = NULL;
  d->out[p] = NULL;
  if (e.in_bytes) WEFT_CHECK(resolve(d, p, &desc->in, &in));
  if (e.out_bytes) WEFT_CHECK(resolve(d, p, &desc->out, &d->out[p]));
  d->in[p] = in;
  return ncclSuccess;
}

/* Publish this rank's buffers, wait for every peer's, and map theirs when every rank can share. */
static ncclResult_t arrive(struct weft_direct* d, const struct weft_task* t, struct weft_waiter* w,
                           uint64_t seq, int* all_capable) {
  size_t bytes = t->count * weft_dt_size(t->dtype);
  post_desc(d, t, seq);
  /* In case a peer cannot share */
  if (t->coll == WEFT_COLL_ALLREDUCE && bytes <= WEFT_DIRECT_SMALL_MAX) weft_direct_small_post(d, t, seq);
  post_fp(d, seq);
  weft_host_post_counter(&d->mine->arrive, &d->mine->arrive_sleepers, seq);
  WEFT_CHECK(weft_direct_wait_all(d, w, 0, seq));
  WEFT_CHECK(check_all(d, seq)); /* before a peer's descriptors are believed */
  /* Memory safety does not rest on WEFT_CHECK_CALLS: buffers of another shape are never touched. */
  const struct weft_desc* mine = &d->mine->desc[seq & 1];
  for (int p = 0; p < d->nranks; p++)
    if (!same_shape(mine, &d->boards[p]->desc[seq & 1]))
      return weft_direct_found(d, p, d->cur_seq, &d->fp, d->boards[p]->op_seq[seq & 1],
                               &d->boards[p]->fp[seq & 1]);
  *all_capable = 1;
  for (int p = 0; p < d->nranks; p++) *all_capable &= d->boards[p]->desc[seq & 1].capable;
  if (!*all_capable) return ncclSuccess;
  for (int p = 0; p < d->nranks; p++) {
    if (p == d->rank) {
      d->in[p] = t->sendbuff;
      d->out[p] = t->recvbuff;
      continue;
    }
    WEFT_CHECK(map_peer(d, t, p, seq));
  }
  return ncclSuccess;
}

/* A direct operation that failed because a peer gave up: when that was a mismatch another rank
 * found, say so (ncclInvalidUsage) rather than that the peer failed. */
static ncclResult_t direct_failed(struct weft_direct* d, ncclResult_t res) {
  ncclResult_t why = res == ncclRemoteError ? weft_direct_poisoned(d) : ncclSuccess;
  return weft_direct_fail(d, why != ncclSuccess ? why : res);
}

/* Where this rank runs now, for its peers' waits (shared_cpu in wait.c), which otherwise learn
 * it only from this rank's own waits: a rank the kernel started on a peer's CPU, or moved there,
 * is then seen there at once, and the peer moves away instead of spinning while this rank waits in
 * that CPU's queue (2 ranks started on one CPU, 20-call tests of 8 B: 17 of 216 launches took
 * over 1 us per call without this, 12 of them 195-400 us; 5 of 216 with it, 4 at 100-200 us). Written only
 * when it changed: peers read the line. */
static void note_cpu(struct weft_direct* d) {
  int cpu = sched_getcpu();
  if (__atomic_load_n(&d->mine->cpu, __ATOMIC_RELAXED) != cpu)
    __atomic_store_n(&d->mine->cpu, cpu, __ATOMIC_RELAXED);
}

/* The profiler's Coll event starts here, once the call is known to take a shared-board path. */
static void chosen(struct weft_waiter* w) {
  weft_prof_coll_path(w->prof, "DIRECT", "SIMPLE", 1);
  weft_prof_chan_begin(w->prof, 0);
}

ncclResult_t weft_host_direct_run(struct weft_direct* d, const struct weft_task* t, struct weft_waiter* w,
                                  uint64_t call_seq, int* handled) {
  *handled = 0;
  if (d == NULL) return ncclSuccess;
  if (__atomic_load_n(&d->mine->failed, __ATOMIC_RELAXED)) {
    WEFT_WARN("Rank %d: %s (seq %llu) refused: an earlier operation of this communicator failed", d->rank,
              w->opname, (unsigned long long)w->seq);
    return ncclInvalidUsage;
  }
  /* A rank whose part of a mismatched call ended before anyone found it learns here. */
  WEFT_CHECK(weft_direct_poisoned(d));
  d->cur_seq = call_seq;
  d->fp = d->hist[call_seq & 1] = weft_call_fp_of(t);
  d->tag = w->step_tag;
  /* A call's own selection (nccl*Config) is the planner's to meet: the direct paths bypass it. */
  int direct = d->enabled && !d->forced && supported(t->coll) && t->opts.sig == 0;
  d->in_ring = !direct;
  if (!direct) {
    if (d->check) record_ring(d);
    return ncclSuccess;
  }
  size_t es = weft_dt_size(t->dtype), bytes = t->count * es;
  struct weft_dev_redop op = {.kind = t->op.kind, .scalar = t->op.scalar, .divisor = t->op.divisor};
  if (t->op.scalar_ptr) memcpy(&op.scalar, t->op.scalar_ptr, es);
  w->oversub = d->oversub;
  w->cpu_slot = &d->mine->cpu;
  w->memory = &d->wait_memory;
  note_cpu(d);
  uint64_t seq = ++d->seq;
  ncclResult_t res;
  int allreduce = t->coll == WEFT_COLL_ALLREDUCE;
  if (allreduce && bytes <= WEFT_DIRECT_EXCHANGE_MAX) {
    /* One step: inputs go through the boards, no descriptors, any buffers. */
    *handled = 1;
    chosen(w);
    weft_direct_small_post(d, t, seq);
    post_fp(d, seq);
    weft_host_post_counter(&d->mine->arrive, &d->mine->arrive_sleepers, seq);
    res = weft_direct_small_reduce(d, t, &op, w, seq);
    return res == ncclSuccess ? res : direct_failed(d, res);
  }
  int all_capable;
  res = arrive(d, t, w, seq, &all_capable);
  if (res != ncclSuccess) return direct_failed(d, res);
  if (all_capable) {
    *handled = 1;
    chosen(w);
    res = weft_direct_run_coll(d, t, &op, w, seq);
  } else if (allreduce && bytes <= WEFT_DIRECT_SMALL_MAX) {
    *handled = 1;
    chosen(w);
    res = weft_direct_small_reduce(d, t, &op, w, seq);
  }
  return res == ncclSuccess ? res : direct_failed(d, res);
}
