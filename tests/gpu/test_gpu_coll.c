/* Every collective x datatype x op on the CUDA backend with ranks sharing the GPU, as threads
 * or as processes, against coll_util.h's independent reference: inputs are made on the host,
 * copied to device buffers, and the whole output allocation (guard bytes included) is copied
 * back and checked. Usage: test_gpu_coll [threads|procs|mismatch|devices|devthreads|visible|rotated|hosts]
 * [nranks] [max_count] [collective]; without arguments a quick run (threads, 2 ranks, small counts). SKIP
 * without a GPU. */
#include "gpu_util.h"

struct gpu_run {
  struct case_list cases;
  size_t pool_bytes; /* largest allocation any case needs, per buffer */
};

/* Device twin of a host pointer inside one of the case's host allocations. The receive
 * allocation's range is the one whose size is known (alloc_bytes); a pointer outside it is in
 * the send allocation. (Testing the send range with alloc_bytes, as this did, mapped receive
 * buffers that malloc placed right after a smaller send allocation into d_send: the emulated
 * GPU's first run found it.) */
static void* twin(const void* host_ptr, const struct case_bufs* b, char* d_send, char* d_recv) {
  const char* p = host_ptr;
  if (p >= b->alloc_recv && p < b->alloc_recv + b->alloc_bytes) return d_recv + (p - b->alloc_recv);
  return d_send + (p - b->alloc_send);
}

static int run_case_gpu(const struct coll_case* c, ncclComm_t comm, int me, int n, cudaStream_t st,
                        char* d_send, char* d_recv, void* d_scalar) {
  struct case_bufs b;
  if (case_setup(c, me, n, &b) != 0) return 1;
  size_t in_bytes = in_elems(c, n) * dt_table[c->dt].size + 1;
  GPU_CHECK(cudaMemcpyAsync(d_recv, b.alloc_recv, b.alloc_bytes, cudaMemcpyHostToDevice, st));
  if (b.alloc_send) GPU_CHECK(cudaMemcpyAsync(d_send, b.alloc_send, in_bytes, cudaMemcpyHostToDevice, st));
  ncclRedOp_t op = ncclSum;
  ncclResult_t res = ncclSuccess;
  uint64_t host_scalar = 0;
  if (c->op == O_PMS_HOST || c->op == O_PMS_DEV) {
    /* The device scalar is read when the op runs: it holds 1 at creation and PMS_SCALAR after. */
    int dev = c->op == O_PMS_DEV;
    dt_set(&host_scalar, 0, (ncclDataType_t)c->dt, dev ? 1 : PMS_SCALAR);
    if (dev) GPU_CHECK(cudaMemcpyAsync(d_scalar, &host_scalar, 8, cudaMemcpyHostToDevice, st));
    GPU_CHECK(cudaStreamSynchronize(st));
    res = ncclRedOpCreatePreMulSum(&op, dev ? d_scalar : (void*)&host_scalar, (ncclDataType_t)c->dt,
                                   dev ? ncclScalarDevice : ncclScalarHostImmediate, comm);
    dt_set(&host_scalar, 0, (ncclDataType_t)c->dt, dev ? PMS_SCALAR : 1);
    if (dev) GPU_CHECK(cudaMemcpyAsync(d_scalar, &host_scalar, 8, cudaMemcpyHostToDevice, st));
  } else if (c->op >= 0) {
    static const ncclRedOp_t builtin[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
    op = builtin[c->op];
  }
  if (res == ncclSuccess)
    res = case_call_stream(c, comm, me, n, twin(b.send, &b, d_send, d_recv), twin(b.recv, &b, d_send, d_recv),
                           op, st);
  int bad = 0;
  if (res != ncclSuccess) {
    fprintf(stderr, "FAILED " CASE_FMT ": returned %s: %s\n", CASE_ARGS(c, n, me), ncclGetErrorString(res),
            ncclGetLastError(comm));
    bad = 1;
  } else {
    GPU_CHECK(cudaMemcpyAsync(b.alloc_recv, d_recv, b.alloc_bytes, cudaMemcpyDeviceToHost, st));
    GPU_CHECK(cudaStreamSynchronize(st));
    bad = case_check(c, me, n, &b);
  }
  if ((c->op == O_PMS_HOST || c->op == O_PMS_DEV) && ncclRedOpDestroy(op, comm) != ncclSuccess) bad++;
  free(b.alloc_send);
  free(b.alloc_recv);
  if (bad) case_fail();
  return bad;
}

static int gpu_body(ncclComm_t comm, int rank, int nranks, void* arg) {
  const struct gpu_run* run = arg;
  cudaStream_t st;
  GPU_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  /* One pool per rank for the whole list: cudaFree between cases would wait for the other
   * ranks' kernels, which may wait for this rank's next launch. */
  char *d_send, *d_recv;
  void* d_scalar;
  GPU_CHECK(cudaMalloc((void**)&d_send, run->pool_bytes));
  GPU_CHECK(cudaMalloc((void**)&d_recv, run->pool_bytes));
  GPU_CHECK(cudaMalloc(&d_scalar, 8));
  int problems = 0;
  for (int i = 0; i < run->cases.n; i++)
    problems += run_case_gpu(&run->cases.v[i], comm, rank, nranks, st, d_send, d_recv, d_scalar) != 0;
  GPU_CHECK(cudaStreamSynchronize(st));
  cudaFree(d_send);
  cudaFree(d_recv);
  cudaFree(d_scalar);
  cudaStreamDestroy(st);
  return problems;
}

/* Mode "mismatch": ranks (processes) whose environments disagree on what shapes a ring step;
 * the communicator must agree at init on one step size, channel count and rank 0's protocol
 * choice, or the ranks cut different steps and wait for each other until WEFT_TIMEOUT. */
static void mismatched_env(int rank, int nranks) {
  (void)nranks;
  static const char* env[3][3] = {{"NCCL_BUFFSIZE=65536", "NCCL_PROTO=Simple", "NCCL_MAX_NCHANNELS=2"},
                                  {"NCCL_LL_BUFFSIZE=32768", "NCCL_MIN_NCHANNELS=3", NULL},
                                  {"NCCL_BUFFSIZE=262144", "NCCL_PROTO=LL,Simple", NULL}};
  for (int i = 0; i < 3 && env[rank % 3][i] != NULL; i++) putenv((char*)env[rank % 3][i]);
}

/* Modes "devices" and "devthreads": rank r on device r % devices (processes, or threads), so
 * that with WEFT_EMU_NO_PEER_ACCESS=1 (or NCCL_P2P_DISABLE=1) neighbours reach each other through
 * shared memory, or with NCCL_SHM_DISABLE=1 as well through the network. Mode "hosts": processes
 * on two emulated hosts (WEFT_HOSTID), ranks [0, n/2) on the first, joined over the network. */
static void device_of_rank(int rank, int nranks) {
  (void)nranks;
  int n = 1;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) n = 1;
  if (cudaSetDevice(rank % n) != cudaSuccess) fprintf(stderr, "FAILED rank %d: cudaSetDevice\n", rank);
}

/* Modes "visible" and "rotated" (processes): each rank selects its device 0, which
 * CUDA_VISIBLE_DEVICES makes GPU r % devices, as launchers do that give each process its GPU;
 * "visible" lists that GPU only, "rotated" all of them from it on ("1,2,0"), so the others are
 * visible under other ordinals. The ranks must tell the GPUs apart by bus id, not by ordinal. */
static void visible_of_rank(int rank, int nranks, int all) {
  (void)nranks;
  int n = 1;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) n = 1;
  char list[256] = "";
  size_t len = 0;
  for (int i = 0; i < (all ? n : 1) && len + 8 < sizeof(list); i++)
    len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%d", i ? "," : "", (rank + i) % n);
  setenv("CUDA_VISIBLE_DEVICES", list, 1);
  if (cudaSetDevice(0) != cudaSuccess) fprintf(stderr, "FAILED rank %d: cudaSetDevice\n", rank);
}
static void visible_one(int rank, int nranks) { visible_of_rank(rank, nranks, 0); }
static void visible_all(int rank, int nranks) { visible_of_rank(rank, nranks, 1); }

static void host_of_rank(int rank, int nranks) {
  char h[32];
  snprintf(h, sizeof(h), "gpu-host-%d", rank * 2 / nranks);
  setenv("WEFT_HOSTID", h, 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 0); /* the emulated hosts are all on this machine */
  device_of_rank(rank, nranks);
}

int main(int argc, char** argv) {
  gpu_require();
  const char* mode = argc > 1 ? argv[1] : "threads";
  int nranks = argc > 2 ? atoi(argv[2]) : 2;
  size_t max_count = argc > 3 ? (size_t)strtoull(argv[3], NULL, 0) : 3000;
  const char* filter = argc > 4 ? argv[4] : NULL;
  coll_base_seed = pick_seed();
  struct gpu_run run = {0};
  cases_matrix(&run.cases, nranks, coll_base_seed, max_count);
  cases_edges(&run.cases, nranks, coll_base_seed);
  /* A few large cases (threads only: processes sharing a GPU take turns on it, slowly): Simple
   * protocol, several channels, several loops of the ring. */
  for (int i = 0; i < 3 && strcmp(mode, "threads") == 0; i++) {
    struct coll_case c = {i == 0   ? C_ALLREDUCE
                          : i == 1 ? C_ALLGATHER
                                   : C_REDUCESCATTER,
                          ncclFloat32,
                          O_SUM,
                          i & 1,
                          0,
                          (size_t)(3 << 20) + 13 * (size_t)i,
                          mix64(coll_base_seed + 99 + (uint64_t)i)};
    if (i == 1) c.op = O_NONE;
    case_add(&run.cases, c);
  }
  if (filter) { /* keep one collective's cases only */
    int kept = 0;
    for (int i = 0; i < run.cases.n; i++)
      if (strcmp(coll_names[run.cases.v[i].coll], filter) == 0) run.cases.v[kept++] = run.cases.v[i];
    run.cases.n = kept;
  }
  for (int i = 0; i < run.cases.n; i++) {
    const struct coll_case* c = &run.cases.v[i];
    size_t sz = dt_table[c->dt].size, in = in_elems(c, nranks), out = out_elems(c, nranks);
    size_t need = (in > out ? in : out) * sz + GUARD_BYTES + 1;
    if (need > run.pool_bytes) run.pool_bytes = need;
  }
  printf("%s, %d ranks, %d cases, base seed 0x%llx\n", mode, nranks, run.cases.n,
         (unsigned long long)coll_base_seed);
  fflush(stdout);
  if (strcmp(mode, "mismatch") == 0) coll_rank_setup = mismatched_env;
  if (strcmp(mode, "devices") == 0) coll_rank_setup = device_of_rank;
  if (strcmp(mode, "hosts") == 0) coll_rank_setup = host_of_rank;
  if (strcmp(mode, "visible") == 0) coll_rank_setup = visible_one;
  if (strcmp(mode, "rotated") == 0) coll_rank_setup = visible_all;
  if (strcmp(mode, "devthreads") == 0) coll_thread_setup = device_of_rank;
  int as_threads = strcmp(mode, "threads") == 0 || strcmp(mode, "devthreads") == 0;
  int failed = as_threads ? run_threads(nranks, gpu_body, &run) : run_procs(nranks, gpu_body, &run, 600);
  failed += coll_failures;
  printf("%s\n", failed ? "FAILED" : "all cases match the reference");
  free(run.cases.v);
  return failed ? 1 : 0;
}
