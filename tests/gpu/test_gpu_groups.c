/* Groups of more send/recv and collective tasks than the kernel arguments hold (WEFT_CUDA_MAX_WORKS)
 * on the CUDA backend: each group must be one kernel, or a send and its matching receive can land
 * in different kernels and deadlock. Messages are larger than the connector FIFO (NCCL_BUFFSIZE
 * 64 KiB), so a send only completes once its receive runs. Scenarios: every rank sends all its
 * messages before receiving any; ranks that order sends, receives and peers differently; a
 * Gather-like group (the root receives from every rank); collectives mixed with sends; the first
 * scenario captured in a CUDA graph and replayed. WEFT_TIMEOUT (30 s here) turns a deadlock into
 * a failure. Usage: test_gpu_groups [threads|procs] [nranks]. SKIP without a GPU. */
#include "gpu_util.h"

#define MSG_ELEMS 32768 /* floats: 128 KiB, twice the FIFO */
#define ROUNDS 25       /* messages per peer and direction: 2 x 25 x (nranks - 1) tasks */
#define NCOLL 30        /* all-reduces of the mixed group */
#define COLL_ELEMS 1000
#define REPLAYS 3

struct grp_bufs {
  cudaStream_t st;
  float *d_send, *d_recv, *h;
  size_t elems; /* of each buffer */
};

/* The value element i of message k from src to dst carries in iteration it (exact in a float). */
static float msg_value(int src, int dst, int k, size_t i, int it) {
  return (float)((src * 131 + dst * 17 + k * 7 + (int)(i % 4093) + it * 29) % 100003);
}

static int check_msg(const float* got, int src, int dst, int k, int it, const char* what, int me) {
  for (size_t i = 0; i < MSG_ELEMS; i++) {
    float want = msg_value(src, dst, k, i, it);
    if (got[i] != want) {
      fprintf(stderr, "FAILED %s rank %d: message %d from rank %d, element %zu is %g, want %g\n", what, me, k,
              src, i, got[i], want);
      return 1;
    }
  }
  return 0;
}

/* Peer of slot j (1..n-1) in this rank's order: ascending, or descending on odd ranks if mixed. */
static int peer_of(int me, int n, int j, int dir, int mixed) {
  if (mixed && (me & 1)) j = n - j;
  return dir > 0 ? (me + j) % n : (me - j + n) % n;
}

/* Every rank exchanges ROUNDS messages with every peer. order 0: all sends, then all receives (on
 * every rank: split into kernels of 44 tasks, no receive runs in the first kernel); order 1: odd
 * ranks receive first and walk their peers the other way. */
static ncclResult_t exchange_calls(ncclComm_t comm, int me, int n, struct grp_bufs* b, int order) {
  int recv_first = order == 1 && (me & 1);
  ncclResult_t res = ncclGroupStart();
  for (int pass = 0; pass < 2 && res == ncclSuccess; pass++) {
    int sending = recv_first ? pass == 1 : pass == 0;
    for (int k = 0; k < ROUNDS && res == ncclSuccess; k++)
      for (int j = 1; j < n && res == ncclSuccess; j++) {
        size_t slot = (size_t)k * (n - 1) + (j - 1);
        int p = peer_of(me, n, j, sending ? 1 : -1, order == 1);
        res = sending ? ncclSend(b->d_send + slot * MSG_ELEMS, MSG_ELEMS, ncclFloat32, p, comm, b->st)
                      : ncclRecv(b->d_recv + slot * MSG_ELEMS, MSG_ELEMS, ncclFloat32, p, comm, b->st);
      }
  }
  ncclResult_t end = ncclGroupEnd();
  return res != ncclSuccess ? res : end;
}

static void fill_sends(int me, int n, struct grp_bufs* b, int order, int it) {
  for (int k = 0; k < ROUNDS; k++)
    for (int j = 1; j < n; j++) {
      size_t slot = (size_t)k * (n - 1) + (j - 1);
      int p = peer_of(me, n, j, 1, order == 1);
      for (size_t i = 0; i < MSG_ELEMS; i++) b->h[slot * MSG_ELEMS + i] = msg_value(me, p, k, i, it);
    }
  size_t bytes = (size_t)ROUNDS * (n - 1) * MSG_ELEMS * sizeof(float);
  GPU_CHECK(cudaMemcpyAsync(b->d_send, b->h, bytes, cudaMemcpyHostToDevice, b->st));
  GPU_CHECK(cudaMemsetAsync(b->d_recv, 0, bytes, b->st));
  GPU_CHECK(cudaStreamSynchronize(b->st));
}

static int check_exchange(int me, int n, struct grp_bufs* b, int order, int it, const char* what) {
  size_t bytes = (size_t)ROUNDS * (n - 1) * MSG_ELEMS * sizeof(float);
  GPU_CHECK(cudaMemcpyAsync(b->h, b->d_recv, bytes, cudaMemcpyDeviceToHost, b->st));
  GPU_CHECK(cudaStreamSynchronize(b->st));
  for (int k = 0; k < ROUNDS; k++)
    for (int j = 1; j < n; j++) {
      size_t slot = (size_t)k * (n - 1) + (j - 1);
      int p = peer_of(me, n, j, -1, order == 1);
      if (check_msg(b->h + slot * MSG_ELEMS, p, me, k, it, what, me)) return 1;
    }
  return 0;
}

static int run_exchange(ncclComm_t comm, int me, int n, struct grp_bufs* b, int order, int it) {
  const char* what = order == 0 ? "sends-first exchange" : "mixed-order exchange";
  fill_sends(me, n, b, order, it);
  ncclResult_t res = exchange_calls(comm, me, n, b, order);
  if (res != ncclSuccess) {
    fprintf(stderr, "FAILED %s rank %d: %s: %s\n", what, me, ncclGetErrorString(res), ncclGetLastError(comm));
    return 1;
  }
  return check_exchange(me, n, b, order, it, what);
}

/* The root receives ROUNDS messages from every other rank (more tasks than one launch's arguments
 * as soon as there are 3 ranks); the others send them. */
static int run_gather(ncclComm_t comm, int me, int n, struct grp_bufs* b, int root, int it) {
  size_t bytes = (size_t)ROUNDS * (n - 1) * MSG_ELEMS * sizeof(float);
  for (int k = 0; k < ROUNDS; k++)
    for (size_t i = 0; i < MSG_ELEMS; i++) b->h[(size_t)k * MSG_ELEMS + i] = msg_value(me, root, k, i, it);
  GPU_CHECK(cudaMemcpyAsync(b->d_send, b->h, (size_t)ROUNDS * MSG_ELEMS * sizeof(float),
                            cudaMemcpyHostToDevice, b->st));
  GPU_CHECK(cudaMemsetAsync(b->d_recv, 0, bytes, b->st));
  ncclResult_t res = ncclGroupStart();
  for (int k = 0; k < ROUNDS && res == ncclSuccess; k++)
    for (int r = 0; r < n && res == ncclSuccess; r++) {
      if (r == root) continue;
      size_t slot = (size_t)k * (n - 1) + (r < root ? r : r - 1);
      if (me == root)
        res = ncclRecv(b->d_recv + slot * MSG_ELEMS, MSG_ELEMS, ncclFloat32, r, comm, b->st);
      else if (me == r)
        res = ncclSend(b->d_send + (size_t)k * MSG_ELEMS, MSG_ELEMS, ncclFloat32, root, comm, b->st);
    }
  ncclResult_t end = ncclGroupEnd();
  if (res == ncclSuccess) res = end;
  if (res != ncclSuccess) {
    fprintf(stderr, "FAILED gather rank %d: %s: %s\n", me, ncclGetErrorString(res), ncclGetLastError(comm));
    return 1;
  }
  GPU_CHECK(cudaMemcpyAsync(b->h, b->d_recv, bytes, cudaMemcpyDeviceToHost, b->st));
  GPU_CHECK(cudaStreamSynchronize(b->st));
  for (int k = 0; k < ROUNDS && me == root; k++)
    for (int r = 0; r < n; r++) {
      if (r == root) continue;
      size_t slot = (size_t)k * (n - 1) + (r < root ? r : r - 1);
      if (check_msg(b->h + slot * MSG_ELEMS, r, root, k, it, "gather", me)) return 1;
    }
  return 0;
}

/* NCOLL all-reduces and a sends-first exchange in one group: collectives and sends/recvs share it. */
static int run_mixed(ncclComm_t comm, int me, int n, struct grp_bufs* b, int it) {
  fill_sends(me, n, b, 0, it);
  float* d_coll = b->d_send + (size_t)ROUNDS * (n - 1) * MSG_ELEMS; /* after the messages */
  for (int c = 0; c < NCOLL; c++)
    for (int i = 0; i < COLL_ELEMS; i++) b->h[(size_t)c * COLL_ELEMS + i] = (float)(me + c + i % 11 + it);
  GPU_CHECK(cudaMemcpyAsync(d_coll, b->h, (size_t)NCOLL * COLL_ELEMS * sizeof(float), cudaMemcpyHostToDevice,
                            b->st));
  ncclResult_t res = ncclGroupStart();
  for (int c = 0; c < NCOLL && res == ncclSuccess; c++)
    res = ncclAllReduce(d_coll + (size_t)c * COLL_ELEMS, d_coll + (size_t)c * COLL_ELEMS, COLL_ELEMS,
                        ncclFloat32, ncclSum, comm, b->st);
  if (res == ncclSuccess) res = exchange_calls(comm, me, n, b, 0);
  ncclResult_t end = ncclGroupEnd();
  if (res == ncclSuccess) res = end;
  if (res != ncclSuccess) {
    fprintf(stderr, "FAILED mixed rank %d: %s: %s\n", me, ncclGetErrorString(res), ncclGetLastError(comm));
    return 1;
  }
  if (check_exchange(me, n, b, 0, it, "mixed group")) return 1;
  GPU_CHECK(cudaMemcpyAsync(b->h, d_coll, (size_t)NCOLL * COLL_ELEMS * sizeof(float), cudaMemcpyDeviceToHost,
                            b->st));
  GPU_CHECK(cudaStreamSynchronize(b->st));
  for (int c = 0; c < NCOLL; c++)
    for (int i = 0; i < COLL_ELEMS; i++) {
      float want = (float)(n * (n - 1) / 2 + n * (c + i % 11 + it));
      if (b->h[(size_t)c * COLL_ELEMS + i] != want) {
        fprintf(stderr, "FAILED mixed rank %d: all-reduce %d element %d is %g, want %g\n", me, c, i,
                b->h[(size_t)c * COLL_ELEMS + i], want);
        return 1;
      }
    }
  return 0;
}

/* The sends-first exchange captured once and replayed with new inputs: the captured launch's
 * work list must stay valid for every replay. */
static int run_graph(ncclComm_t comm, int me, int n, struct grp_bufs* b) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  GPU_CHECK(cudaStreamBeginCapture(b->st, cudaStreamCaptureModeThreadLocal));
  ncclResult_t res = exchange_calls(comm, me, n, b, 0);
  GPU_CHECK(cudaStreamEndCapture(b->st, &graph));
  if (res != ncclSuccess) {
    fprintf(stderr, "FAILED graph rank %d: capture: %s: %s\n", me, ncclGetErrorString(res),
            ncclGetLastError(comm));
    cudaGraphDestroy(graph);
    return 1;
  }
  GPU_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  int bad = 0;
  for (int it = 0; it < REPLAYS && !bad; it++) {
    fill_sends(me, n, b, 0, 100 + it);
    GPU_CHECK(cudaGraphLaunch(exec, b->st));
    bad = check_exchange(me, n, b, 0, 100 + it, "graph replay");
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return bad;
}

static int groups_body(ncclComm_t comm, int rank, int nranks, void* arg) {
  (void)arg;
  struct grp_bufs b;
  GPU_CHECK(cudaStreamCreateWithFlags(&b.st, cudaStreamNonBlocking));
  b.elems = (size_t)ROUNDS * (nranks - 1) * MSG_ELEMS + (size_t)NCOLL * COLL_ELEMS;
  GPU_CHECK(cudaMalloc((void**)&b.d_send, b.elems * sizeof(float)));
  GPU_CHECK(cudaMalloc((void**)&b.d_recv, b.elems * sizeof(float)));
  b.h = malloc(b.elems * sizeof(float));
  int bad = 0;
  for (int it = 0; it < 2 && !bad; it++) { /* twice: device work lists are reused */
    bad += run_exchange(comm, rank, nranks, &b, 0, it);
    if (!bad) bad += run_exchange(comm, rank, nranks, &b, 1, it);
    if (!bad) bad += run_gather(comm, rank, nranks, &b, it % nranks, it);
    if (!bad) bad += run_mixed(comm, rank, nranks, &b, it);
  }
  if (!bad) bad += run_graph(comm, rank, nranks, &b);
  GPU_CHECK(cudaStreamSynchronize(b.st));
  cudaFree(b.d_send);
  cudaFree(b.d_recv);
  cudaStreamDestroy(b.st);
  free(b.h);
  return bad;
}

int main(int argc, char** argv) {
  gpu_require();
  const char* mode = argc > 1 ? argv[1] : "threads";
  int nranks = argc > 2 ? atoi(argv[2]) : 3;
  setenv("NCCL_BUFFSIZE", "65536", 0); /* messages of 128 KiB do not fit the FIFO */
  setenv("WEFT_TIMEOUT", "30", 0);     /* a deadlocked kernel gives up instead of hanging */
  printf("%s, %d ranks, %d tasks per exchange group\n", mode, nranks, 2 * ROUNDS * (nranks - 1));
  fflush(stdout);
  int failed = strcmp(mode, "procs") == 0 ? run_procs(nranks, groups_body, NULL, 600)
                                          : run_threads(nranks, groups_body, NULL);
  printf("%s\n", failed ? "FAILED" : "large groups match");
  return failed ? 1 : 0;
}
