/* Communicator creation: ncclGetUniqueId, ncclCommInitRank(Config), ncclCommInitAll,
 * ncclCommInitRankScalable. Setup runs inline, as a group job (inside ncclGroupStart/End), or
 * on a background thread for nonblocking configs. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "collectives/coll.h"
#include "collectives/profiler.h"
#include "collectives/trace.h"
#include "collectives/tuner.h"
#include "core/api.h"
#include "core/comm.h"
#include "core/config.h"
#include "core/group.h"
#include "core/init.h"
#include "core/peers.h"
#include "core/topology.h"
#include "doctor/doctor.h"
#include "util/check.h"
#include "util/cuda.h"
#include "util/param.h"

static void print_version_once(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, weft_print_version);
}

void weft_print_version(void) {
  weft_log(WEFT_LOG_VERSION, WEFT_ALL, __FILE__, __LINE__,
           "NCCL version %d.%d.%d+weft%s (Weft %s, NCCL API %d.%d.%d)", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
           WEFT_VERSION_STRING, WEFT_VERSION_STRING, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
}

static ncclResult_t choose_backend(enum weft_backend* out) {
  const char* want = weft_param_str("WEFT_BACKEND");
  if (want == NULL || strcmp(want, "auto") == 0 || strcmp(want, "host") == 0) {
    /* auto: CUDA when this build has it and a device answers, else host */
    int auto_cuda = (want == NULL || strcmp(want, "auto") == 0) && weft_cuda_usable();
    *out = auto_cuda ? WEFT_BACKEND_CUDA : WEFT_BACKEND_HOST;
    return ncclSuccess;
  }
  if (strcmp(want, "cuda") == 0) {
    if (weft_cuda_usable()) {
      *out = WEFT_BACKEND_CUDA;
      return ncclSuccess;
    }
    WEFT_WARN("WEFT_BACKEND=cuda: the CUDA backend is not usable here (%s); use WEFT_BACKEND=host or auto",
              weft_cuda_unusable_reason());
    return ncclInvalidUsage;
  }
  WEFT_WARN("Invalid WEFT_BACKEND value '%s': expected auto, cuda or host", want);
  return ncclInvalidArgument;
}

ncclResult_t weft_comm_alloc(int rank, int nranks, int cuda_dev, const ncclConfig_t* config,
                             struct ncclComm** out) {
  struct ncclComm* comm = calloc(1, sizeof(*comm));
  if (comm == NULL) {
    WEFT_WARN("Out of memory allocating a communicator");
    return ncclSystemError;
  }
  ncclResult_t res;
  WEFT_CHECK_GOTO(weft_config_parse(config, &comm->ctx.config), res, fail);
  WEFT_CHECK_GOTO(choose_backend(&comm->ctx.backend), res, fail);
  comm->magic = WEFT_COMM_MAGIC;
  comm->ctx.rank = rank;
  comm->ctx.nranks = nranks;
  comm->ctx.cuda_dev = cuda_dev;
  comm->ctx.async_result = ncclInProgress;
  *out = comm;
  return ncclSuccess;
fail:
  free(comm);
  return res;
}

/* What a setup needs besides the comm: the unique ids, or the parent for a split. */
struct init_job {
  struct weft_async_job base;
  ncclUniqueId* ids;
  int nids;
  struct ncclComm* parent;
  int* parent_ranks;
};

/* One line saying where this rank runs: "backend cuda" with its device, or "backend host". */
static void log_backend(const struct ncclComm* comm) {
  if (comm->ctx.backend != WEFT_BACKEND_CUDA) {
    WEFT_INFO(WEFT_INIT, "comm %p rank %d: backend host (collectives on CPUs over host memory)", (void*)comm,
              comm->ctx.rank);
    return;
  }
  char desc[160];
  weft_cuda_device_desc(comm->ctx.cuda_dev, desc, sizeof(desc));
  WEFT_INFO(WEFT_INIT, "comm %p rank %d: backend cuda, device %d (%s)", (void*)comm, comm->ctx.rank,
            comm->ctx.cuda_dev, desc);
}

/* The device's PCI bus id as NCCL's init lines print it (hex, "1b000"); 0 on the host backend. */
static unsigned long long log_busid(const struct ncclComm* comm) {
  int64_t bus = comm->ctx.backend == WEFT_BACKEND_CUDA ? weft_cuda_device_busid(comm->ctx.cuda_dev) : -1;
  return bus < 0 ? 0 : (unsigned long long)bus;
}

ncclResult_t weft_comm_setup(struct ncclComm* comm, const ncclUniqueId* ids, int nids,
                             struct ncclComm* parent, const int* parent_ranks) {
  weft_log_set_device(comm->ctx.cuda_dev);
  if (parent == NULL) comm->ctx.comm_hash = weft_hash_bytes(ids, sizeof(ncclUniqueId) * nids, 0);
  WEFT_INFO(WEFT_INIT, "comm %p rank %d nranks %d cudaDev %d busId %llx commId 0x%llx - Init START",
            (void*)comm, comm->ctx.rank, comm->ctx.nranks, comm->ctx.cuda_dev, log_busid(comm),
            (unsigned long long)comm->ctx.comm_hash);
  log_backend(comm);
  if (parent != NULL)
    WEFT_CHECK(weft_bootstrap_split(parent->ctx.bootstrap, comm->ctx.rank, comm->ctx.nranks, parent_ranks,
                                    &comm->ctx.abort_flag, &comm->ctx.bootstrap));
  else if (nids > 1)
    WEFT_CHECK(weft_bootstrap_init_scalable(ids, nids, comm->ctx.rank, comm->ctx.nranks,
                                            &comm->ctx.abort_flag, &comm->ctx.bootstrap));
  else
    WEFT_CHECK(weft_bootstrap_init(&ids[0], comm->ctx.rank, comm->ctx.nranks, &comm->ctx.abort_flag,
                                   &comm->ctx.bootstrap));
  WEFT_CHECK(weft_peers_exchange(comm));
  WEFT_CHECK(weft_comm_topo_init(comm));
  /* Before the planner agrees its settings: every rank must have loaded the same plugin. */
  struct weft_tuner_comm tc = {comm->ctx.comm_hash, comm->ctx.rank, comm->ctx.nranks, comm->ctx.nnodes,
                               comm->ctx.local_nranks};
  WEFT_CHECK(weft_tuner_create(&tc, &comm->ctx.tuner));
  WEFT_CHECK(weft_coll_comm_init(&comm->ctx));
  weft_trace_create(&comm->ctx);
  weft_prof_create(&comm->ctx); /* after the hash, ranks and nodes it reports are known */
  WEFT_INFO(
      WEFT_INIT,
      "comm %p rank %d nranks %d cudaDev %d busId %llx commId 0x%llx localRanks %d nodes %d - Init COMPLETE",
      (void*)comm, comm->ctx.rank, comm->ctx.nranks, comm->ctx.cuda_dev, log_busid(comm),
      (unsigned long long)comm->ctx.comm_hash, comm->ctx.local_nranks, comm->ctx.nnodes);
  return ncclSuccess;
}

static ncclResult_t setup(struct weft_async_job* base) {
  struct init_job* job = (struct init_job*)base;
  return weft_comm_setup(base->comm, job->ids, job->nids, job->parent, job->parent_ranks);
}

static void job_free(struct init_job* job) {
  free(job->ids);
  free(job->parent_ranks);
  free(job);
}

static void setup_done(struct weft_async_job* base, ncclResult_t res) {
  struct ncclComm* comm = base->comm;
  __atomic_store_n(&comm->ctx.async_result, res, __ATOMIC_RELEASE);
  job_free((struct init_job*)base);
}

static void* setup_thread(void* arg) {
  struct weft_async_job* job = arg;
  setup_done(job, setup(job));
  return NULL;
}

/* Runs the job inline, at the end of the current group, or in the background. */
static ncclResult_t run_setup(struct ncclComm* comm, struct init_job* job) {
  job->base.run = setup;
  job->base.done = setup_done;
  job->base.comm = comm;
  if (weft_group_depth() > 0) {
    weft_group_add_job(&job->base);
    return ncclSuccess;
  }
  if (!comm->ctx.config.blocking) {
    if (pthread_create(&comm->init_thread, NULL, setup_thread, job) != 0) {
      WEFT_WARN("Could not start the background init thread");
      job_free(job);
      return ncclSystemError;
    }
    comm->init_thread_running = 1;
    return ncclInProgress;
  }
  ncclResult_t res = setup(&job->base);
  setup_done(&job->base, res);
  return res;
}

ncclResult_t weft_comm_start(struct ncclComm* comm, const ncclUniqueId* ids, int nids,
                             struct ncclComm* parent, const int* parent_ranks) {
  struct init_job* job = calloc(1, sizeof(*job));
  if (job == NULL) return ncclSystemError;
  job->nids = nids;
  job->parent = parent;
  if (ids != NULL) {
    job->ids = malloc(sizeof(ncclUniqueId) * nids);
    if (job->ids) memcpy(job->ids, ids, sizeof(ncclUniqueId) * nids);
  }
  if (parent_ranks != NULL) {
    job->parent_ranks = malloc(sizeof(int) * comm->ctx.nranks);
    if (job->parent_ranks) memcpy(job->parent_ranks, parent_ranks, sizeof(int) * comm->ctx.nranks);
  }
  if ((ids != NULL && job->ids == NULL) || (parent_ranks != NULL && job->parent_ranks == NULL)) {
    job_free(job);
    return ncclSystemError;
  }
  return run_setup(comm, job);
}

WEFT_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId) {
  WEFT_ARG_CHECK(uniqueId != NULL, "uniqueId is NULL");
  print_version_once();
  return weft_bootstrap_get_unique_id(uniqueId);
}

static ncclResult_t init_rank(ncclComm_t* newcomm, int nranks, int nids, const ncclUniqueId* ids, int rank,
                              int cuda_dev, ncclConfig_t* config) {
  print_version_once();
  weft_doctor_warn_env_once(); /* misspelt NCCL_ and WEFT_ names; NCCL ignores them silently */
  WEFT_ARG_CHECK(newcomm != NULL, "newcomm is NULL");
  *newcomm = NULL;
  WEFT_ARG_CHECK(nranks >= 1, "nranks %d must be at least 1", nranks);
  WEFT_ARG_CHECK(rank >= 0 && rank < nranks, "rank %d must be in [0, %d)", rank, nranks);
  WEFT_ARG_CHECK(nids >= 1 && nids <= nranks, "nId %d must be in [1, nranks %d]", nids, nranks);
  WEFT_ARG_CHECK(ids != NULL, "commId is NULL");
  struct ncclComm* comm = NULL;
  WEFT_CHECK(weft_comm_alloc(rank, nranks, cuda_dev, config, &comm));
  *newcomm = comm; /* visible early so another thread may abort a blocked init */
  __atomic_add_fetch(&comm->launches_in_flight, 1, __ATOMIC_ACQ_REL);
  ncclResult_t res = weft_comm_start(comm, ids, nids, NULL, NULL);
  /* A failed blocking init leaves nothing behind unless an abort already owns the comm. */
  int free_it =
      WEFT_FAILED(res) && weft_group_depth() == 0 && comm->ctx.config.blocking && weft_comm_claim(comm);
  if (free_it) *newcomm = NULL;
  __atomic_sub_fetch(&comm->launches_in_flight, 1, __ATOMIC_ACQ_REL);
  if (free_it) weft_comm_free(comm);
  return res;
}

ncclResult_t weft_comm_init_rank(ncclComm_t* newcomm, int nranks, const ncclUniqueId* id, int rank,
                                 ncclConfig_t* config) {
  return init_rank(newcomm, nranks, 1, id, rank, weft_current_device(), config);
}

WEFT_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
         ncclConfig_t* config) {
  return weft_comm_init_rank(comm, nranks, &commId, rank, config);
}

WEFT_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return weft_comm_init_rank(comm, nranks, &commId, rank, NULL);
}

WEFT_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank, int nId,
         ncclUniqueId* commIds, ncclConfig_t* config) {
  return init_rank(newcomm, nranks, nId, commIds, myrank, weft_current_device(), config);
}

/* Every communicator of ncclCommInitAll lives in this process, each with its connectors and setup
 * thread, so a few thousand is already far beyond what one process can set up (NCCL bounds ndev
 * by the GPUs present); larger values are refused at once instead of running out of memory. */
#define WEFT_INIT_ALL_MAX_DEVS 4096

WEFT_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comms, int ndev, const int* devlist) {
  print_version_once();
  WEFT_ARG_CHECK(comms != NULL, "comms is NULL");
  WEFT_ARG_CHECK(ndev >= 1 && ndev <= WEFT_INIT_ALL_MAX_DEVS, "ndev %d must be in [1, %d]", ndev,
                 WEFT_INIT_ALL_MAX_DEVS);
  for (int i = 0; devlist && i < ndev; i++) {
    WEFT_ARG_CHECK(devlist[i] >= 0, "devlist[%d] = %d is not a device", i, devlist[i]);
    for (int j = 0; j < i; j++)
      WEFT_ARG_CHECK(devlist[i] != devlist[j], "devlist[%d] and devlist[%d] name the same device %d", j, i,
                     devlist[i]);
  }
  ncclUniqueId id;
  WEFT_CHECK(weft_bootstrap_get_unique_id(&id));
  ncclResult_t res = ncclSuccess;
  int written = 0; /* comms[0..written) were set by init_rank; the rest still hold the caller's bytes */
  weft_group_enter();
  for (; written < ndev && res == ncclSuccess; written++)
    res = init_rank(&comms[written], ndev, 1, &id, written, devlist ? devlist[written] : written, NULL);
  ncclResult_t end = weft_group_leave();
  if (res == ncclSuccess) res = end;
  if (WEFT_FAILED(res)) {
    for (int i = 0; i < written; i++) {
      if (comms[i]) weft_comm_free(comms[i]);
      comms[i] = NULL;
    }
  }
  return res;
}
