/* ncclCommQueryProperties: what the communicator offers, in NCCL's versioned struct. Weft has no
 * device API yet, so every device-API capability reads as absent. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/api.h"
#include "core/comm.h"
#include "graph/detect.h"
#include "graph/topo.h"
#include "nccl_device/host.h"
#include "util/check.h"
#include "util/cuda.h"
#include "util/log.h"

#define MAX_NVML_GPUS 64

/* NVML's index of the comm's GPU (found by PCI bus id), as applications pass to NVML; -1 on the
 * host backend and when NVML cannot say (no NVML library, emulated GPU). */
static int nvml_index(const struct ncclComm* comm) {
  if (comm->ctx.backend != WEFT_BACKEND_CUDA) return -1;
  int64_t bus = weft_cuda_device_busid(comm->ctx.cuda_dev);
  struct weft_nvml_gpu* gpus = bus < 0 ? NULL : calloc(MAX_NVML_GPUS, sizeof(*gpus));
  if (gpus == NULL) return -1;
  int n = weft_topo_nvml_gpus(gpus, MAX_NVML_GPUS), found = -1;
  for (int i = 0; i < n && found < 0; i++)
    if (weft_topo_busid_parse(gpus[i].busid) == bus) found = i;
  free(gpus);
  return found;
}

static void fill(const struct ncclComm* comm, ncclCommProperties_t* p) {
  memset(p, 0, sizeof(*p));
  p->rank = comm->ctx.rank;
  p->nRanks = comm->ctx.nranks;
  p->cudaDev = comm->ctx.cuda_dev; /* what ncclCommCuDevice reports, on either backend */
  p->nvmlDev = nvml_index(comm);
  p->deviceApiSupport = false;
  p->multimemSupport = false;
  p->ginType = NCCL_GIN_TYPE_NONE;
  p->nLsaTeams = 0; /* no device API: no LSA teams to offer */
  /* ncclPutSignal / ncclSignal / ncclWaitSignal: real between ranks of one host (host backend) */
  p->hostRmaSupport = comm->ctx.backend == WEFT_BACKEND_HOST;
  p->railedGinType = NCCL_GIN_TYPE_NONE;
  p->commHash =
      comm->ctx.comm_hash; /* from the unique id (or the parent's hash for a split): same on every rank */
  p->ginConnectionType = NCCL_GIN_CONNECTION_NONE;
}

#define FIELD_END(f) (offsetof(ncclCommProperties_t, f) + sizeof(((ncclCommProperties_t*)0)->f))

/* Bytes of the struct, from the start, that hold whole fields within the caller's size: a
 * caller built against an older header has a shorter struct, and nothing past it is written. */
static size_t covered(size_t size) {
  static const size_t ends[] = {FIELD_END(rank),
                                FIELD_END(nRanks),
                                FIELD_END(cudaDev),
                                FIELD_END(nvmlDev),
                                FIELD_END(deviceApiSupport),
                                FIELD_END(multimemSupport),
                                FIELD_END(ginType),
                                FIELD_END(nLsaTeams),
                                FIELD_END(hostRmaSupport),
                                FIELD_END(railedGinType),
                                FIELD_END(commHash),
                                FIELD_END(ginMinStride),
                                FIELD_END(ginConnectionType),
                                FIELD_END(ginSupport),
                                FIELD_END(devCommRuntimeVersionSize),
                                FIELD_END(cftSupport),
                                FIELD_END(cftMulticastSupport),
                                FIELD_END(cftCountedSupport)};
  size_t n = 0;
  for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++)
    if (ends[i] <= size) n = ends[i];
  return n;
}

WEFT_API(ncclResult_t, ncclCommQueryProperties, ncclComm_t comm, ncclCommProperties_t* props) {
  WEFT_CHECK(weft_comm_check(comm, "ncclCommQueryProperties"));
  WEFT_ARG_CHECK(props != NULL, "ncclCommQueryProperties: props is NULL (comm %p rank %d)", (void*)comm,
                 comm->ctx.rank);
  WEFT_ARG_CHECK(props->magic == NCCL_API_MAGIC,
                 "ncclCommQueryProperties: props->magic is 0x%x, not NCCL_API_MAGIC 0x%x: initialize props "
                 "with NCCL_COMM_PROPERTIES_INITIALIZER (comm %p rank %d)",
                 props->magic, NCCL_API_MAGIC, (void*)comm, comm->ctx.rank);
  size_t head = offsetof(ncclCommProperties_t, rank), n = covered(props->size);
  WEFT_ARG_CHECK(
      n > head,
      "ncclCommQueryProperties: props->size %zu holds no field (the first, rank, ends at byte %zu); "
      "initialize props with NCCL_COMM_PROPERTIES_INITIALIZER (comm %p rank %d)",
      props->size, FIELD_END(rank), (void*)comm, comm->ctx.rank);
  ncclCommProperties_t p;
  fill(comm, &p);
  /* size, magic and version stay the caller's; a newer caller's extra fields stay untouched. */
  memcpy((char*)props + head, (const char*)&p + head, n - head);
  WEFT_INFO(WEFT_INIT,
            "ncclCommQueryProperties: comm %p rank %d of %d, cudaDev %d, nvmlDev %d, commHash 0x%llx, "
            "%zu of %zu bytes filled (caller's size %zu, version %u)",
            (void*)comm, p.rank, p.nRanks, p.cudaDev, p.nvmlDev, (unsigned long long)p.commHash, n, sizeof(p),
            props->size, props->version);
  return ncclSuccess;
}
