/* The device API's own bodies in include/nccl_device/ on the emulated GPU: teams, window
 * pointers from a peer table, and the LSA barrier (ncclLsaBarrierSession, and ncclBarrierSession
 * over a world team that is one LSA team). Weft's ncclDevCommCreate does not exist yet, so the
 * test builds what it will fill by hand: 2-4 ranks in one grid (blocks r*BLOCKS.. are rank r),
 * each with its device communicator and windows over cudaMalloc memory. Every iteration each
 * rank writes its slice (one of them late), syncs, checks every peer's slice, and syncs again
 * before rewriting; a barrier that lets a rank through early shows as wrong words. Run twice to check that a
 * barrier's epoch carries over from one launch to the next. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_device.h"

#define MAX_RANKS 4
#define BLOCKS 2
#define THREADS 64
#define WORDS 256 /* per rank and block */
#define ITERS 40

static int failures;
#define CHECK(cond, ...)                     \
  do {                                       \
    if (!(cond)) {                           \
      fprintf(stderr, "FAIL: " __VA_ARGS__); \
      fprintf(stderr, "\n");                 \
      failures++;                            \
    }                                        \
  } while (0)
#define CUDA(call) CHECK((call) == cudaSuccess, "%s", #call)

__device__ static uint32_t value(int rank, int block, int iter, int i) {
  return (uint32_t)(rank * 1000003 + block * 10007 + iter * 101 + i);
}

/* Holds the block back for a while, so that its peers run ahead into the barrier. */
__device__ static void lag(uint64_t ns) {
  uint64_t start = weft_emu_globaltimer();
  while (weft_emu_globaltimer() - start < ns) weft_emu_spin_pause();
}

__global__ void exchange_kernel(const ncclDevComm* comms, const ncclWindow_t* wins, int launch, int* wrong) {
  int r = blockIdx.x / BLOCKS, b = blockIdx.x % BLOCKS;
  ncclDevComm const& comm = comms[r];
  ncclWindow_t win = wins[r];
  ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), comm, ncclTeamTagLsa(), (uint32_t)b};
  ncclGin gin{comm, 0};
  ncclBarrierSession<ncclCoopCta> worldBar{ncclCoopCta(), ncclTeamTagWorld(), gin, (uint32_t)b};
  ncclTeam lsa = ncclTeamLsa(comm);
  size_t offset = (size_t)b * WORDS * sizeof(uint32_t);
  uint32_t* mine = (uint32_t*)ncclGetLocalPointer(win, offset);
  for (int it = launch * ITERS; it < (launch + 1) * ITERS; it++) {
    if (threadIdx.x == 0 && r == it % lsa.nRanks) lag(100000); /* one rank writes late */
    __syncthreads();
    for (int i = threadIdx.x; i < WORDS; i += blockDim.x) mine[i] = value(r, b, it, i);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    int bad = 0;
    for (int p = 0; p < lsa.nRanks; p++) {
      const uint32_t* theirs = (const uint32_t*)ncclGetLsaPointer(win, offset, p);
      for (int i = threadIdx.x; i < WORDS; i += blockDim.x) bad += theirs[i] != value(p, b, it, i);
    }
    if (bad) __atomic_fetch_add(wrong, bad, __ATOMIC_RELAXED);
    worldBar.sync(ncclCoopCta(), cuda::memory_order_acq_rel, ncclGinFenceLevel::Relaxed);
  }
}
WEFT_EMU_KERNEL(exchange_kernel);

/* A window of n ranks over bufs[], as ncclCommWindowRegister will describe it on the device. */
static ncclWindow_t make_window(char** bufs, int n, int rank, size_t size) {
  char** table;
  ncclWindow_vidmem w = {};
  ncclWindow_t dev;
  CUDA(cudaMalloc((void**)&table, n * sizeof(char*)));
  CUDA(cudaMemcpy(table, bufs, n * sizeof(char*), cudaMemcpyHostToDevice));
  w.lsaBase = table, w.size = size, w.lsaRank = rank, w.lsaSize = n, w.worldRank = rank;
  CUDA(cudaMalloc((void**)&dev, sizeof(w)));
  CUDA(cudaMemcpy(dev, &w, sizeof(w), cudaMemcpyHostToDevice));
  return dev;
}

static void run(int n) {
  /* Resource buffer of each rank: the LSA barriers at handle 0, the world barriers at handle 1
   * (128 bytes further), each BLOCKS x (1 epoch + n inbox slots) words. */
  size_t resSize = 2 * 128, dataSize = (size_t)BLOCKS * WORDS * sizeof(uint32_t);
  char *res[MAX_RANKS], *data[MAX_RANKS];
  for (int r = 0; r < n; r++) {
    CUDA(cudaMalloc((void**)&res[r], resSize));
    CUDA(cudaMemset(res[r], 0, resSize));
    CUDA(cudaMalloc((void**)&data[r], dataSize));
  }
  ncclDevComm comms[MAX_RANKS];
  ncclWindow_t wins[MAX_RANKS];
  for (int r = 0; r < n; r++) {
    memset(&comms[r], 0, sizeof(comms[r]));
    comms[r].magic = NCCL_API_MAGIC, comms[r].version = NCCL_VERSION_CODE;
    comms[r].rank = comms[r].lsaRank = r;
    comms[r].nRanks = comms[r].lsaSize = n;
    comms[r].resourceWindow = make_window(res, n, r, resSize);
    comms[r].lsaBarrier = ncclLsaBarrierHandle{0, BLOCKS};
    comms[r].barrier = ncclLsaBarrierHandle{1, BLOCKS};
    wins[r] = make_window(data, n, r, dataSize);
  }
  ncclDevComm* devComms;
  ncclWindow_t* devWins;
  int* wrong;
  CUDA(cudaMalloc((void**)&devComms, sizeof(comms)));
  CUDA(cudaMemcpy(devComms, comms, sizeof(comms), cudaMemcpyHostToDevice));
  CUDA(cudaMalloc((void**)&devWins, sizeof(wins)));
  CUDA(cudaMemcpy(devWins, wins, sizeof(wins), cudaMemcpyHostToDevice));
  CUDA(cudaMalloc((void**)&wrong, sizeof(int)));
  CUDA(cudaMemset(wrong, 0, sizeof(int)));
  for (int launch = 0; launch < 2; launch++) {
    void* args[] = {&devComms, &devWins, &launch, &wrong};
    CUDA(cudaLaunchKernel((const void*)exchange_kernel, dim3(n * BLOCKS), dim3(THREADS), args, 0, NULL));
    CUDA(cudaDeviceSynchronize());
  }
  int bad = -1;
  CUDA(cudaMemcpy(&bad, wrong, sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(bad == 0, "%d ranks: %d words read before their writer reached the barrier", n, bad);
  for (int r = 0; r < n; r++) {
    uint32_t epochs[2][BLOCKS];
    CUDA(cudaMemcpy(epochs[0], res[r], sizeof(epochs[0]), cudaMemcpyDeviceToHost));
    CUDA(cudaMemcpy(epochs[1], res[r] + 128, sizeof(epochs[1]), cudaMemcpyDeviceToHost));
    for (int b = 0; b < BLOCKS; b++)
      CHECK(epochs[0][b] == 2 * ITERS && epochs[1][b] == 2 * ITERS,
            "%d ranks: rank %d barrier %d at epochs %u, %u", n, r, b, epochs[0][b], epochs[1][b]);
  }
  for (int r = 0; r < n; r++) {
    cudaFree(res[r]);
    cudaFree(data[r]);
  }
  cudaFree(devComms);
  cudaFree(devWins);
  cudaFree(wrong);
  printf("%d ranks: %d iterations of 2 barriers in %d blocks each, every word as written\n", n, 2 * ITERS,
         BLOCKS);
}

/* Teams of a 2 x 4 job (LSA teams of 4) seen from world rank 6, on the host: under the emulator
 * device functions are host functions. */
static void teams(void) {
  ncclDevComm c;
  memset(&c, 0, sizeof(c));
  c.rank = 6, c.nRanks = 8, c.lsaRank = 2, c.lsaSize = 4;
  ncclTeam w = ncclTeamWorld(c), l = ncclTeamLsa(c), rail = ncclTeamRail(c);
  CHECK(w.nRanks == 8 && w.rank == 6 && w.stride == 1, "world team");
  CHECK(l.nRanks == 4 && l.rank == 2 && l.stride == 1, "LSA team");
  CHECK(rail.nRanks == 2 && rail.rank == 1 && rail.stride == 4, "rail team");
  CHECK(ncclTeamRankToWorld(c, l, 0) == 4 && ncclTeamRankToWorld(c, rail, 0) == 2, "team rank to world");
  CHECK(ncclTeamRankToLsa(c, w, 7) == 3 && ncclTeamRankToLsa(c, l, 1) == 1, "team rank to LSA");
}

int main(void) {
  teams();
  for (int n = 2; n <= MAX_RANKS; n++) run(n);
  if (failures) return 1;
  printf("test_emu_lsa_barrier: passed\n");
  return 0;
}
