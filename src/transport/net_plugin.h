/* External network plugins (NCCL's net plugin ABI, v6 to v12) behind struct weft_net_ops: the
 * loader (net_plugin.c) opens what NCCL_NET_PLUGIN names and the adapter (net_plugin_comm.c)
 * runs Weft's messages over each plugin's comms. */
#ifndef WEFT_TRANSPORT_NET_PLUGIN_H
#define WEFT_TRANSPORT_NET_PLUGIN_H

#include "transport/net.h"
#include "transport/net_plugin_abi.h"

#define WEFT_NET_MAX_PLUGINS 16 /* NCCL_NET_MAX_PLUGINS */

/* One loaded plugin library. */
struct weft_plugin {
  const struct weft_plugin_net* t;
  int version;
  void* ctx; /* v11 and later: what init returned */
  void* dl;  /* dlopen handle */
  char lib[256];
  struct weft_net_ops ops;
};

/* The plugins NCCL_NET_PLUGIN names (default libnccl-net.so; "none": none), loaded and
 * initialized once per process, in list order; *n of them are at out[0..n-1]. */
void weft_net_plugins(const struct weft_net_ops* const** out, int* n);

/* Comm-level calls of the adapter (net_plugin_comm.c), shared by every plugin. */
ncclResult_t weft_plugin_wrap_listen(struct weft_plugin* p, void* listen_comm, void** out);
ncclResult_t weft_plugin_accept(void* listen_comm, void** recv_comm);
ncclResult_t weft_plugin_wrap_comm(struct weft_plugin* p, void* comm, int is_send, void** out);
ncclResult_t weft_plugin_isend(void* send_comm, const void* data, size_t size, int tag, void** request);
ncclResult_t weft_plugin_isend_meta(void* send_comm, const void* data, size_t size, int tag, uint64_t meta,
                                    void** request);
ncclResult_t weft_plugin_irecv(void* recv_comm, int n, void* const* data, const size_t* sizes,
                               const int* tags, void** request);
ncclResult_t weft_plugin_test(void* request, int* done, size_t* sizes);
ncclResult_t weft_plugin_test_meta(void* request, int* done, size_t* sizes, uint64_t* meta);
ncclResult_t weft_plugin_close_send(void* send_comm);
ncclResult_t weft_plugin_close_recv(void* recv_comm);
ncclResult_t weft_plugin_close_listen(void* listen_comm);
ncclResult_t weft_plugin_keep_registered(void* comm, void* data, size_t size);
void weft_plugin_drop_registered(void* comm, void* data, size_t size);
ncclResult_t weft_plugin_keep_registered_gpu(void* comm, void* data, size_t size, int dmabuf_fd);

/* Version shims (net_plugin.c): each call with the argument list the plugin's version has. */
ncclResult_t weft_plugin_call_accept(struct weft_plugin* p, void* listen_comm, void** recv_comm);
/* type: WEFT_PLUGIN_PTR_HOST or WEFT_PLUGIN_PTR_CUDA (NCCL_PTR_*). */
ncclResult_t weft_plugin_call_reg(struct weft_plugin* p, void* comm, void* data, size_t size, int type,
                                  void** mh);
ncclResult_t weft_plugin_call_isend(struct weft_plugin* p, void* comm, void* data, size_t size, void* mh,
                                    void** req);
ncclResult_t weft_plugin_call_irecv(struct weft_plugin* p, void* comm, void* data, size_t size, void* mh,
                                    void** req);

#endif
