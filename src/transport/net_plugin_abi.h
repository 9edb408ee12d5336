/* The binary interface of NCCL network plugins, versions 6 to 12, as Weft reads it: the symbol
 * a plugin library exports points at a table of function pointers whose order never changed
 * across versions; only some calls' argument lists did. So one table describes them all, each
 * slot a union of that slot's per-version signatures; a version only ever touches the slots it
 * has. Property structs differ in their leading fields, read through a few prefixes. */
#ifndef WEFT_TRANSPORT_NET_PLUGIN_ABI_H
#define WEFT_TRANSPORT_NET_PLUGIN_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#define WEFT_PLUGIN_HANDLE_BYTES 128 /* NCCL_NET_HANDLE_MAXSIZE: what a plugin's listen may fill */
#define WEFT_PLUGIN_MAX_REQUESTS 32  /* NCCL_NET_MAX_REQUESTS: requests in flight a plugin must take */
#define WEFT_PLUGIN_PTR_HOST 0x1     /* NCCL_PTR_HOST: regMr type and ptrSupport bit */
#define WEFT_PLUGIN_PTR_CUDA 0x2
#define WEFT_PLUGIN_PTR_DMABUF 0x4 /* ptrSupport: regMrDmaBuf takes a DMA-BUF of GPU memory */
#define WEFT_PLUGIN_VERSION_MIN 6
#define WEFT_PLUGIN_VERSION_MAX 12

/* What NCCL passes as its logger (level and subsystem values are those of util/log.h). */
typedef void (*weft_plugin_logger_t)(int level, unsigned long flags, const char* file, int line,
                                     const char* fmt, ...);
typedef ncclResult_t (*weft_plugin_profiler_t)(void** event, int type, void* parent, int64_t plugin_id,
                                               void* data);

/* Connect's optional offload handle (v7 and later) and comm config (v10 and later). */
struct weft_plugin_dev_handle {
  int type, version;
  void* handle;
  size_t size;
  int needs_proxy_progress;
};
struct weft_plugin_comm_config {
  int traffic_class; /* -1: undefined */
};

/* Leading fields of the properties each version fills; the rest is never read. v6 and v7 have
 * neither regIsGlobal nor forceFlush, v8 only regIsGlobal. */
struct weft_plugin_props_v6 {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support;
  int speed, port;
  float latency;
  int max_comms, max_recvs;
};
struct weft_plugin_props_v8 {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support, reg_is_global;
  int speed, port;
  float latency;
  int max_comms, max_recvs;
};
struct weft_plugin_props_v9 {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support, reg_is_global, force_flush;
  int speed, port;
  float latency;
  int max_comms, max_recvs;
};
/* Room for the largest properties struct of any version (v12's is under 200 bytes). */
union weft_plugin_props {
  struct weft_plugin_props_v6 v6;
  struct weft_plugin_props_v8 v8;
  struct weft_plugin_props_v9 v9;
  char room[512];
};

typedef struct weft_plugin_dev_handle weft_pdh;
typedef struct weft_plugin_comm_config weft_pcc;

/* Slot by slot; suffixes name the first version with that signature. */
struct weft_plugin_net {
  const char* name;
  union {
    ncclResult_t (*v6)(weft_plugin_logger_t log);
    ncclResult_t (*v10)(weft_plugin_logger_t log, weft_plugin_profiler_t prof);
    ncclResult_t (*v11)(void** ctx, uint64_t comm_id, weft_pcc* config, weft_plugin_logger_t log,
                        weft_plugin_profiler_t prof);
  } init;
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*get_properties)(int dev, void* props);
  union {
    ncclResult_t (*v6)(int dev, void* handle, void** listen_comm);
    ncclResult_t (*v11)(void* ctx, int dev, void* handle, void** listen_comm);
  } listen;
  union {
    ncclResult_t (*v6)(int dev, void* handle, void** send_comm);
    ncclResult_t (*v7)(int dev, void* handle, void** send_comm, weft_pdh** dev_comm);
    ncclResult_t (*v10)(int dev, weft_pcc* config, void* handle, void** send_comm, weft_pdh** dev_comm);
    ncclResult_t (*v11)(void* ctx, int dev, void* handle, void** send_comm, weft_pdh** dev_comm);
  } connect;
  union {
    ncclResult_t (*v6)(void* listen_comm, void** recv_comm);
    ncclResult_t (*v7)(void* listen_comm, void** recv_comm, weft_pdh** dev_comm);
  } accept;
  union {
    ncclResult_t (*v6)(void* comm, void* data, int size, int type, void** mhandle);
    ncclResult_t (*v8)(void* comm, void* data, size_t size, int type, void** mhandle);
  } reg_mr;
  /* GPU memory (GPUDirect RDMA), the same in every version. */
  ncclResult_t (*reg_mr_dmabuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                                void** mhandle);
  ncclResult_t (*dereg_mr)(void* comm, void* mhandle);
  union {
    ncclResult_t (*v6)(void* send_comm, void* data, int size, int tag, void* mhandle, void** request);
    ncclResult_t (*v9)(void* send_comm, void* data, size_t size, int tag, void* mhandle, void** request);
    ncclResult_t (*v10)(void* send_comm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                        void** request);
  } isend;
  union {
    ncclResult_t (*v6)(void* recv_comm, int n, void** data, int* sizes, int* tags, void** mhandles,
                       void** request);
    ncclResult_t (*v9)(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                       void** request);
    ncclResult_t (*v10)(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                        void** phandles, void** request);
  } irecv;
  void* iflush; /* never called: GPU memory that needs a flush is not used (plug_gpu_direct) */
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*close_send)(void* send_comm);
  ncclResult_t (*close_recv)(void* recv_comm);
  ncclResult_t (*close_listen)(void* listen_comm);
  void* get_device_mr;                 /* v7 and later; offload only */
  void* irecv_consumed;                /* v7 and later; offload only */
  void* make_vdevice;                  /* v9 and later */
  ncclResult_t (*finalize)(void* ctx); /* v11 and later */
  void* set_net_attr;                  /* v11 and later */
};

/* CollNet tables: only the name (their first field in every version) is read. */
struct weft_plugin_collnet {
  const char* name;
};

#endif
