/* The registration cache of declared long-lived ranges (net_regcache.h): a few entries per comm,
 * reference-counted by keeps and by the requests in flight that use them. */
#include "transport/net_regcache.h"

#include <string.h>

#include "util/check.h"
#include "util/log.h"

void weft_net_regcache_init(struct weft_net_regcache* rc, void* owner,
                            ncclResult_t (*reg)(void* owner, void* data, size_t size, void** mh),
                            void (*dereg)(void* owner, void* mh)) {
  memset(rc, 0, sizeof(*rc));
  rc->owner = owner;
  rc->reg = reg;
  rc->dereg = dereg;
}

static struct weft_net_kept* covering(struct weft_net_regcache* rc, uintptr_t lo, uintptr_t hi) {
  for (int i = 0; i < WEFT_NET_REGCACHE_MAX; i++) {
    struct weft_net_kept* k = &rc->e[i];
    if (k->keeps > 0 && k->lo <= lo && hi <= k->hi) return k;
  }
  return NULL;
}

static void unref(struct weft_net_regcache* rc, struct weft_net_kept* k) {
  if (--k->refs > 0) return;
  rc->dereg(rc->owner, k->mh);
  memset(k, 0, sizeof(*k));
}

/* gpu: GPU memory, registered through rc->reg_gpu with dmabuf_fd; else host memory (rc->reg). */
static ncclResult_t keep(struct weft_net_regcache* rc, void* data, size_t size, int gpu, int dmabuf_fd) {
  uintptr_t lo = (uintptr_t)data, hi = lo + size;
  if (size == 0) return ncclSuccess;
  struct weft_net_kept* k = covering(rc, lo, hi);
  for (int i = 0; k == NULL && i < WEFT_NET_REGCACHE_MAX; i++)
    if (rc->e[i].refs == 0) k = &rc->e[i];
  if (k == NULL) {
    WEFT_INFO(WEFT_NET,
              "NET: more than %d ranges kept registered on one comm: %zu bytes at %p are registered "
              "per request",
              WEFT_NET_REGCACHE_MAX, size, data);
    return ncclSuccess;
  }
  if (k->refs == 0) {
    WEFT_CHECK(gpu ? rc->reg_gpu(rc->owner, data, size, dmabuf_fd, &k->mh)
                   : rc->reg(rc->owner, data, size, &k->mh));
    k->lo = lo;
    k->hi = hi;
  }
  k->keeps++;
  k->refs++;
  return ncclSuccess;
}

ncclResult_t weft_net_regcache_keep(struct weft_net_regcache* rc, void* data, size_t size) {
  return keep(rc, data, size, 0, -1);
}

ncclResult_t weft_net_regcache_keep_gpu(struct weft_net_regcache* rc, void* data, size_t size,
                                        int dmabuf_fd) {
  if (rc->reg_gpu == NULL) return ncclInternalError;
  return keep(rc, data, size, 1, dmabuf_fd);
}

void weft_net_regcache_drop(struct weft_net_regcache* rc, void* data, size_t size) {
  uintptr_t lo = (uintptr_t)data;
  struct weft_net_kept* k = NULL;
  /* The entry registered for exactly this range first: a covering one took the keep otherwise. */
  for (int i = 0; k == NULL && i < WEFT_NET_REGCACHE_MAX; i++)
    if (rc->e[i].keeps > 0 && rc->e[i].lo == lo && rc->e[i].hi == lo + size) k = &rc->e[i];
  if (k == NULL) k = covering(rc, lo, lo + size);
  if (k == NULL || size == 0) return;
  k->keeps--;
  unref(rc, k);
}

struct weft_net_kept* weft_net_regcache_find(struct weft_net_regcache* rc, const void* data, size_t size) {
  struct weft_net_kept* k = covering(rc, (uintptr_t)data, (uintptr_t)data + size);
  if (k == NULL) return NULL;
  k->refs++;
  rc->hits++;
  return k;
}

void weft_net_regcache_release(struct weft_net_regcache* rc, struct weft_net_kept* k) {
  if (k != NULL) unref(rc, k);
}

void weft_net_regcache_fini(struct weft_net_regcache* rc) {
  for (int i = 0; i < WEFT_NET_REGCACHE_MAX; i++)
    if (rc->e[i].refs > 0) rc->dereg(rc->owner, rc->e[i].mh);
  memset(rc->e, 0, sizeof(rc->e));
}
