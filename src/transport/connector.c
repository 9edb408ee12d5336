/* Connector memory: a control page and the Simple and LL FIFOs, in POSIX shared memory between
 * processes or in process memory between ranks that are threads of one process. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "transport/connector.h"
#include "util/check.h"
#include "util/log.h"

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

int weft_cause_set_kind(struct weft_cause* c, int kind, int rank, const char* host, const char* what) {
  uint32_t empty = 0;
  if (!__atomic_compare_exchange_n(&c->state, &empty, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return 0;
  c->kind = (uint32_t)kind;
  c->rank = rank;
  snprintf(c->host, sizeof(c->host), "%s", host ? host : "?");
  snprintf(c->what, sizeof(c->what), "%s", what ? what : "");
  __atomic_store_n(&c->state, 2, __ATOMIC_RELEASE);
  return 1;
}

int weft_cause_set(struct weft_cause* c, int rank, const char* host) {
  return weft_cause_set_kind(c, WEFT_CAUSE_LOST, rank, host, NULL);
}

int weft_cause_get(const struct weft_cause* c, struct weft_cause* out) {
  if (c == NULL || __atomic_load_n(&c->state, __ATOMIC_ACQUIRE) != 2) return 0;
  /* Field by field: state stays the atomics' (a later writer's compare-and-swap reads it). The
   * rest was written once, before state became 2. */
  out->state = 2;
  out->kind = c->kind;
  out->rank = c->rank;
  out->call = c->call;
  memcpy(out->host, c->host, sizeof(out->host));
  memcpy(out->what, c->what, sizeof(out->what));
  out->host[sizeof(out->host) - 1] = 0;
  out->what[sizeof(out->what) - 1] = 0;
  return 1;
}

int weft_cause_describe(const struct weft_cause* c, char* buf, size_t size) {
  struct weft_cause got;
  buf[0] = 0;
  if (!weft_cause_get(c, &got)) return 0;
  if (got.kind == WEFT_CAUSE_MISMATCH)
    snprintf(buf, size, "mismatched collective%s%s%s, found by rank %d (host %s)", got.what[0] ? " (" : "",
             got.what, got.what[0] ? ")" : "", got.rank, got.host);
  else if (got.kind == WEFT_CAUSE_LEFT)
    snprintf(buf, size, "rank %d (host %s) destroyed its communicator", got.rank, got.host);
  else
    snprintf(buf, size, "rank %d (host %s) was lost", got.rank, got.host);
  return 1;
}

ncclResult_t weft_conn_mem_create(size_t simple_bytes, size_t ll_bytes, int shared, const char* tag,
                                  struct weft_conn_mem** out, struct weft_conn_handle* handle) {
  struct weft_conn_mem* m = calloc(1, sizeof(*m));
  if (m == NULL) return ncclSystemError;
  m->simple_bytes = round_up(simple_bytes, 4096);
  m->ll_bytes = round_up(ll_bytes, 4096);
  m->size = WEFT_CTRL_BYTES + m->simple_bytes + m->ll_bytes;
  m->owner = 1;
  if (shared) {
    struct weft_shm_seg seg;
    ncclResult_t res = weft_shm_create(tag, m->size, &seg);
    if (res != ncclSuccess) {
      free(m);
      return res;
    }
    m->base = seg.ptr;
    m->is_shm = 1;
    m->linked = 1;
    m->shm_fd = seg.fd;
    snprintf(m->name, sizeof(m->name), "%s", seg.name);
  } else {
    /* Zero pages from the kernel, faulted in on first use: a rank holds only the FIFO slots its
     * collectives touch, not NCCL_BUFFSIZE per channel (small jobs of many thread ranks). */
    m->base = mmap(NULL, m->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m->base == MAP_FAILED) {
      WEFT_WARN("Allocating %zu bytes of connector memory failed: mmap: %s", m->size, strerror(errno));
      free(m);
      return ncclSystemError;
    }
    /* Both sides of a connector inside one process share this block; the last one frees it, so
     * a rank destroyed (or aborted) first never pulls memory from under a peer thread. */
    ((struct weft_conn_ctrl*)m->base)->refs = 2;
  }
  memset(handle, 0, sizeof(*handle));
  handle->size = m->size;
  handle->simple_bytes = m->simple_bytes;
  handle->ll_bytes = m->ll_bytes;
  handle->local_ptr = (uint64_t)(uintptr_t)m->base;
  handle->is_shm = m->is_shm;
  snprintf(handle->name, sizeof(handle->name), "%s", m->name);
  *out = m;
  return ncclSuccess;
}

ncclResult_t weft_conn_mem_attach(const struct weft_conn_handle* h, struct weft_conn_mem** out) {
  struct weft_conn_mem* m = calloc(1, sizeof(*m));
  if (m == NULL) return ncclSystemError;
  m->size = h->size;
  m->simple_bytes = h->simple_bytes;
  m->ll_bytes = h->ll_bytes;
  m->is_shm = h->is_shm;
  snprintf(m->name, sizeof(m->name), "%.63s", h->name);
  if (h->is_shm) {
    struct weft_shm_seg seg;
    ncclResult_t res = weft_shm_open(h->name, h->size, &seg);
    if (res != ncclSuccess) {
      free(m);
      return res;
    }
    m->base = seg.ptr;
  } else {
    m->base = (void*)(uintptr_t)h->local_ptr;
  }
  *out = m;
  return ncclSuccess;
}

void weft_conn_mem_unlink(struct weft_conn_mem* m) {
  if (m == NULL || !m->linked) return;
  struct weft_shm_seg seg = {.fd = m->shm_fd};
  weft_shm_unshare(&seg);
  m->linked = 0;
}

void weft_conn_mem_free_base(struct weft_conn_mem* m) {
  if (m->base != NULL) munmap(m->base, m->size);
  m->base = NULL;
}

void weft_conn_mem_release(struct weft_conn_mem* m) {
  if (m == NULL) return;
  if (m->release != NULL) {
    m->release(m);
    return;
  }
  if (m->is_shm) {
    weft_conn_mem_unlink(m);
    struct weft_shm_seg seg = {.ptr = m->base, .size = m->size, .fd = -1};
    weft_shm_close(&seg);
  } else if (m->base != NULL) {
    struct weft_conn_ctrl* c = m->base;
    if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0) weft_conn_mem_free_base(m);
  }
  free(m);
}

size_t weft_conn_slot_bytes(size_t fifo_bytes) { return round_up(fifo_bytes, 4096) / WEFT_NSTEPS; }

void weft_conn_bind(struct weft_conn* conn, struct weft_conn_mem* m, int peer) {
  memset(conn, 0, sizeof(*conn));
  char* base = m->base;
  char* fifo = m->fifo != NULL ? m->fifo : base + WEFT_CTRL_BYTES;
  conn->ctrl = (struct weft_conn_ctrl*)base;
  conn->simple = fifo;
  conn->ll = (struct weft_ll_line*)(fifo + m->simple_bytes);
  conn->simple_slot = m->simple_bytes / WEFT_NSTEPS;
  conn->ll_slot = m->ll_bytes / WEFT_NSTEPS;
  conn->peer = peer;
  conn->mem = m;
}
