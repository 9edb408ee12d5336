/* libibverbs (rdma-core, libibverbs.so.1) loaded with dlopen: the library loads and runs on machines
 * without it, and it is never a link-time dependency. Only verbs' types come from its header at
 * build time; the data-path calls (post_send, post_recv, poll_cq) are the header's inline functions,
 * which go through the context's own ops table, so the table below holds only the exported
 * control-path functions. */
#ifndef WEFT_UTIL_IBVERBS_H
#define WEFT_UTIL_IBVERBS_H

#include "nccl.h"

#if defined(__has_include)
#if __has_include(<infiniband/verbs.h>)
#include <infiniband/verbs.h>
#define WEFT_IBVERBS_HEADERS 1
#endif
#endif

#ifndef WEFT_IBVERBS_HEADERS
#define WEFT_IBVERBS_HEADERS 0
#endif

#if WEFT_IBVERBS_HEADERS
/* The functions Weft calls, as libibverbs exports them. reg_mr_iova2, reg_dmabuf_mr and query_gid_ex
 * are NULL in libraries too old to have them (the optional entries). */
struct weft_ibv_fns {
  struct ibv_device** (*get_device_list)(int* num);
  void (*free_device_list)(struct ibv_device** list);
  const char* (*get_device_name)(struct ibv_device* dev);
  struct ibv_context* (*open_device)(struct ibv_device* dev);
  int (*close_device)(struct ibv_context* ctx);
  int (*query_device)(struct ibv_context* ctx, struct ibv_device_attr* attr);
  int (*query_port)(struct ibv_context* ctx, uint8_t port, struct ibv_port_attr* attr);
  int (*query_gid)(struct ibv_context* ctx, uint8_t port, int index, union ibv_gid* gid);
  struct ibv_pd* (*alloc_pd)(struct ibv_context* ctx);
  int (*dealloc_pd)(struct ibv_pd* pd);
  struct ibv_mr* (*reg_mr)(struct ibv_pd* pd, void* addr, size_t length, int access);
  /* rdma-core 28+: takes optional access flags (relaxed ordering); NULL before. */
  struct ibv_mr* (*reg_mr_iova2)(struct ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                 unsigned access);
  struct ibv_mr* (*reg_dmabuf_mr)(struct ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                                  int access);
  int (*dereg_mr)(struct ibv_mr* mr);
  struct ibv_cq* (*create_cq)(struct ibv_context* ctx, int cqe, void* cq_context, struct ibv_comp_channel* ch,
                              int comp_vector);
  int (*destroy_cq)(struct ibv_cq* cq);
  struct ibv_qp* (*create_qp)(struct ibv_pd* pd, struct ibv_qp_init_attr* attr);
  int (*modify_qp)(struct ibv_qp* qp, struct ibv_qp_attr* attr, int mask);
  int (*destroy_qp)(struct ibv_qp* qp);
  const char* (*wc_status_str)(enum ibv_wc_status status);
  /* rdma-core 32+: a GID with its type (RoCE v1/v2); NULL before, when sysfs says the type. */
  int (*query_gid_ex)(struct ibv_context* ctx, uint32_t port, uint32_t index, struct ibv_gid_entry* entry,
                      uint32_t flags, size_t entry_size);
};

/* The loaded table, or NULL with *why saying why (no library, a symbol missing). Loaded once per
 * process from WEFT_IBVERBS_LIB (default libibverbs.so.1; tests name their own provider). */
const struct weft_ibv_fns* weft_ibv_load(const char** why);
#else
struct weft_ibv_fns;
static inline const struct weft_ibv_fns* weft_ibv_load(const char** why) {
  if (why) *why = "built without <infiniband/verbs.h> (Debian libibverbs-dev)";
  return (const struct weft_ibv_fns*)0;
}
#endif

#endif
