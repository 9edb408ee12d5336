/* The emulated GPU's grid executor: each block of a launch is an OS thread and each of its CUDA
 * threads a fiber (fiber.h), switched only at barriers. A block starts only when the device has
 * room for it (SMs x blocks per SM), as on hardware, so co-residency deadlocks reproduce.
 * Barriers check that every thread of the block arrived at the same call site. */

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <driver_types.h>

#include "emu.h"
#include "fiber.h"

#define MAX_KERNELS 64
#define MAX_DEVICES 16
#define SM_THREADS 2048
#define SM_REGS 65536
#define STACK_BYTES (64 * 1024)     /* per CUDA thread */
#define BLOCK_OS_STACK (256 * 1024) /* the block's scheduler runs on it */

/* ---- reports ---- */

static int strict(void) {
  const char* v = getenv("WEFT_EMU_STRICT");
  return v == NULL || strcmp(v, "0") != 0;
}

static void vreport(const char* fmt, va_list ap) {
  char buf[1024];
  vsnprintf(buf, sizeof(buf), fmt, ap);
  fprintf(stderr, "weft-emu: %s\n", buf);
  fflush(stderr);
}

void weft_emu_report(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(fmt, ap);
  va_end(ap);
}

void weft_emu_fatal(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(fmt, ap);
  va_end(ap);
  if (strict()) abort();
}

/* ---- kernel registry ---- */

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct weft_emu_kernel* kernels[MAX_KERNELS];
static int nkernels;

void weft_emu_register_kernel(const struct weft_emu_kernel* k) {
  pthread_mutex_lock(&reg_lock);
  if (nkernels < MAX_KERNELS)
    kernels[nkernels++] = k;
  else
    weft_emu_report("more than %d kernels registered; %s is ignored", MAX_KERNELS, k->name);
  pthread_mutex_unlock(&reg_lock);
}

const struct weft_emu_kernel* weft_emu_find_kernel(const void* fn) {
  const struct weft_emu_kernel* found = NULL;
  pthread_mutex_lock(&reg_lock);
  for (int i = 0; i < nkernels && !found; i++)
    if (kernels[i]->fn == fn) found = kernels[i];
  pthread_mutex_unlock(&reg_lock);
  return found;
}

/* ---- device shape ---- */

static int env_int(const char* name, int dflt, int lo, int hi) {
  const char* v = getenv(name);
  if (v == NULL || *v == 0) return dflt;
  int x = atoi(v);
  return x < lo ? lo : x > hi ? hi : x;
}

int weft_emu_sm_count(void) { return env_int("WEFT_EMU_SMS", 132, 1, 1024); }
int weft_emu_device_count(void) { return env_int("WEFT_EMU_DEVICES", 2, 0, MAX_DEVICES); }

int weft_emu_blocks_per_sm(int threads) {
  if (threads < 1) threads = 1;
  int set = env_int("WEFT_EMU_BLOCKS_PER_SM", 0, 0, 64);
  if (set > 0) return set;
  int regs = env_int("WEFT_EMU_REGS_PER_THREAD", 128, 16, 255);
  int warps_threads = (threads + 31) / 32 * 32;
  int by_regs = SM_REGS / (regs * warps_threads);
  int by_threads = SM_THREADS / warps_threads;
  int n = by_regs < by_threads ? by_regs : by_threads;
  return n > 32 ? 32 : n;
}

/* ---- residency: room on each device, handed out first come first served ---- */

struct device_room {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  long used;                          /* units of resident blocks (SM_THREADS units per SM) */
  unsigned long next_ticket, serving; /* FIFO among waiting blocks */
};
static struct device_room rooms[MAX_DEVICES];
static pthread_once_t rooms_once = PTHREAD_ONCE_INIT;

static void rooms_init(void) {
  for (int i = 0; i < MAX_DEVICES; i++) {
    pthread_mutex_init(&rooms[i].lock, NULL);
    pthread_cond_init(&rooms[i].cond, NULL);
  }
}

/* A block of a kernel that fits bps blocks per SM takes SM_THREADS / bps units. */
static long block_units(int threads) {
  int bps = weft_emu_blocks_per_sm(threads);
  return bps > 0 ? SM_THREADS / bps : SM_THREADS + 1;
}

static void room_enter(int dev, long units) {
  struct device_room* r = &rooms[dev];
  long cap = (long)weft_emu_sm_count() * SM_THREADS;
  pthread_mutex_lock(&r->lock);
  unsigned long me = r->next_ticket++;
  while (me != r->serving || r->used + units > cap) pthread_cond_wait(&r->cond, &r->lock);
  r->used += units;
  r->serving++;
  pthread_cond_broadcast(&r->cond);
  pthread_mutex_unlock(&r->lock);
}

static void room_leave(int dev, long units) {
  struct device_room* r = &rooms[dev];
  pthread_mutex_lock(&r->lock);
  r->used -= units;
  pthread_cond_broadcast(&r->cond);
  pthread_mutex_unlock(&r->lock);
}

/* ---- fiber sets, kept for reuse: creating 512 stacks per block per launch would dominate ---- */

#define SPARE_SETS 32
static pthread_mutex_t spare_lock = PTHREAD_MUTEX_INITIALIZER;
static struct weft_fiber_set* spare[SPARE_SETS];

static struct weft_fiber_set* set_get(int n) {
  pthread_mutex_lock(&spare_lock);
  for (int i = 0; i < SPARE_SETS; i++)
    if (spare[i] && weft_fiber_set_size(spare[i]) == n) {
      struct weft_fiber_set* s = spare[i];
      spare[i] = NULL;
      pthread_mutex_unlock(&spare_lock);
      return s;
    }
  pthread_mutex_unlock(&spare_lock);
  return weft_fiber_set_create(n, STACK_BYTES);
}

static void set_put(struct weft_fiber_set* s) {
  pthread_mutex_lock(&spare_lock);
  for (int i = 0; i < SPARE_SETS; i++)
    if (spare[i] == NULL) {
      spare[i] = s;
      s = NULL;
      break;
    }
  pthread_mutex_unlock(&spare_lock);
  weft_fiber_set_destroy(s);
}

/* ---- one block ---- */

enum { BAR_PLAIN, BAR_OR, BAR_AND, BAR_COUNT };
static const char* bar_names[] = {"__syncthreads", "__syncthreads_or", "__syncthreads_and",
                                  "__syncthreads_count"};

struct cuda_thread {
  struct weft_emu_thread t;
  const char* site; /* barrier it waits at */
  int kind, pred;
  int fenced; /* a fence since its last relaxed store */
};

struct block {
  const struct weft_emu_kernel* k;
  const void* packed;
  int dev, nthreads;
  struct weft_fiber_set* fibers;
  struct cuda_thread* th;
  int cur;        /* the running fiber: atomic, see running() */
  int bar_result; /* of the barrier just completed */
  pthread_t os_thread;
  struct weft_emu_dim grid, dim, idx;
};

static __thread struct block* cur_block;

/* The scheduler sets cur before each resume and the fiber reads it, but the scheduler takes a
 * fiber's history only at barriers (weft_fiber_collect): as plain accesses the race detector would
 * see the next write race with the last fiber's reads. Relaxed atomics suffice on one OS thread. */
static int running(const struct block* b) { return __atomic_load_n(&b->cur, __ATOMIC_RELAXED); }

static struct cuda_thread* self_thread(const char* what) {
  struct block* b = cur_block;
  if (b == NULL) {
    weft_emu_fatal("%s called outside an emulated kernel", what);
    abort();
  }
  return &b->th[running(b)];
}

const struct weft_emu_thread* weft_emu_self(void) { return &self_thread("a device builtin")->t; }

static void thread_main(void* arg, int i) {
  struct block* b = arg;
  (void)i;
  b->k->run(b->k->fn, b->packed);
}

static int barrier(int kind, int pred, const char* site) {
  struct block* b = cur_block;
  struct cuda_thread* t = self_thread(bar_names[kind]);
  t->site = site;
  t->kind = kind;
  t->pred = pred != 0;
  weft_fiber_yield(b->fibers, running(b));
  return b->bar_result;
}

void weft_emu_syncthreads(const char* site) { barrier(BAR_PLAIN, 0, site); }
int weft_emu_syncthreads_or(int pred, const char* site) { return barrier(BAR_OR, pred, site); }
int weft_emu_syncthreads_and(int pred, const char* site) { return barrier(BAR_AND, pred, site); }
int weft_emu_syncthreads_count(int pred, const char* site) { return barrier(BAR_COUNT, pred, site); }

static void block_name(const struct block* b, char* buf, size_t n) {
  snprintf(buf, n, "kernel %s block (%u,%u,%u)", b->k->name, b->idx.x, b->idx.y, b->idx.z);
}

/* Every live thread is at a barrier: check they agree on it and compute its result. A thread
 * that returned while others wait is a divergence too (hardware leaves it undefined). */
static void complete_barrier(struct block* b, int first, int ndone) {
  char name[160];
  block_name(b, name, sizeof(name));
  const struct cuda_thread* f = &b->th[first];
  if (ndone > 0) {
    int gone = 0;
    while (!weft_fiber_done(b->fibers, gone)) gone++;
    weft_emu_fatal("%s: thread %d returned while thread %d waits at %s (%s): barrier divergence", name, gone,
                   first, bar_names[f->kind], f->site);
  }
  int count = 0;
  for (int i = 0; i < b->nthreads; i++) {
    const struct cuda_thread* t = &b->th[i];
    if (t->site != f->site || t->kind != f->kind)
      weft_emu_fatal("%s: barrier divergence: thread %d waits at %s (%s), thread %d at %s (%s)", name, first,
                     bar_names[f->kind], f->site, i, bar_names[t->kind], t->site);
    count += t->pred;
  }
  b->bar_result = f->kind == BAR_OR ? count > 0 : f->kind == BAR_AND ? count == b->nthreads : count;
}

static void run_block_fibers(struct block* b) {
  for (int i = 0; i < b->nthreads; i++) weft_fiber_prepare(b->fibers, i, thread_main, b);
  for (;;) {
    for (int i = 0; i < b->nthreads; i++) {
      if (weft_fiber_done(b->fibers, i)) continue;
      __atomic_store_n(&b->cur, i, __ATOMIC_RELAXED);
      weft_fiber_resume(b->fibers, i);
    }
    weft_fiber_collect(b->fibers); /* every thread's work so far is before the barrier's end */
    int first = -1, ndone = 0;
    for (int i = 0; i < b->nthreads; i++) {
      if (weft_fiber_done(b->fibers, i))
        ndone++;
      else if (first < 0)
        first = i;
    }
    if (first < 0) return;
    complete_barrier(b, first, ndone);
  }
}

static void* block_main(void* arg) {
  struct block* b = arg;
  long units = block_units(b->nthreads);
  room_enter(b->dev, units);
  b->fibers = set_get(b->nthreads);
  if (b->fibers == NULL) {
    weft_emu_fatal("no memory for the %d fibers of a block", b->nthreads);
    room_leave(b->dev, units);
    return NULL;
  }
  cur_block = b;
  run_block_fibers(b);
  cur_block = NULL;
  set_put(b->fibers);
  room_leave(b->dev, units);
  return NULL;
}

/* ---- grids ---- */

int weft_emu_grid_check(struct weft_emu_dim grid, struct weft_emu_dim block) {
  unsigned long threads = (unsigned long)block.x * block.y * block.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0 || threads > 1024 || block.z > 64 ||
      grid.y > 65535 || grid.z > 65535)
    return cudaErrorInvalidConfiguration;
  if (weft_emu_blocks_per_sm((int)threads) < 1) return cudaErrorLaunchOutOfResources;
  return 0;
}

static void fill_threads(struct block* b) {
  int i = 0;
  for (unsigned z = 0; z < b->dim.z; z++)
    for (unsigned y = 0; y < b->dim.y; y++)
      for (unsigned x = 0; x < b->dim.x; x++, i++) {
        struct weft_emu_thread* t = &b->th[i].t;
        t->thread_idx = (struct weft_emu_dim){x, y, z};
        t->block_idx = b->idx;
        t->block_dim = b->dim;
        t->grid_dim = b->grid;
      }
}

int weft_emu_grid_run(const struct weft_emu_kernel* k, const void* packed, struct weft_emu_dim grid,
                      struct weft_emu_dim dim, int dev) {
  int err = weft_emu_grid_check(grid, dim);
  if (err) return err;
  pthread_once(&rooms_once, rooms_init);
  size_t nblocks = (size_t)grid.x * grid.y * grid.z;
  int nthreads = (int)(dim.x * dim.y * dim.z);
  struct block* blocks = calloc(nblocks, sizeof(*blocks));
  struct cuda_thread* th = calloc(nblocks * (size_t)nthreads, sizeof(*th));
  if (blocks == NULL || th == NULL) {
    free(blocks);
    free(th);
    return cudaErrorMemoryAllocation;
  }
  size_t started = 0;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, BLOCK_OS_STACK);
  for (size_t i = 0; i < nblocks; i++) {
    struct block* b = &blocks[i];
    *b = (struct block){.k = k,
                        .packed = packed,
                        .dev = dev % MAX_DEVICES,
                        .nthreads = nthreads,
                        .th = th + i * (size_t)nthreads,
                        .grid = grid,
                        .dim = dim};
    b->idx = (struct weft_emu_dim){(unsigned)(i % grid.x), (unsigned)(i / grid.x % grid.y),
                                   (unsigned)(i / grid.x / grid.y)};
    fill_threads(b);
    if (pthread_create(&b->os_thread, &attr, block_main, b) != 0) {
      weft_emu_fatal("cannot start the OS thread of block %zu of kernel %s: %s", i, k->name, strerror(errno));
      break;
    }
    started++;
  }
  pthread_attr_destroy(&attr);
  for (size_t i = 0; i < started; i++) pthread_join(blocks[i].os_thread, NULL);
  free(th);
  free(blocks);
  return started == nblocks ? 0 : cudaErrorLaunchOutOfResources;
}

/* ---- device-side services ---- */

uint64_t weft_emu_globaltimer(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Device threads poll memory other blocks write; on a 2-core host the writer may not be running,
 * so a poll that keeps failing gives its CPU away. */
void weft_emu_spin_pause(void) { sched_yield(); }

/* ThreadSanitizer ignores the fence (GCC warns so): weft_emu_store_relaxed_u64 stands in for it. */
#if defined(__SANITIZE_THREAD__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wtsan"
#endif
void weft_emu_fence(void) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  if (cur_block) cur_block->th[running(cur_block)].fenced = 1;
}

void weft_emu_store_relaxed_u64(uint64_t* p, uint64_t v) {
  struct cuda_thread* t = cur_block ? &cur_block->th[running(cur_block)] : NULL;
  if (t && t->fenced) {
    t->fenced = 0;
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
  } else {
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
  }
}
