/* Kernels written against Weft's nccl_device.h with every device API call nccl-tests 2.19.6
 * makes (LSA and multimem all-reduce, GIN and hybrid all-to-all): test_nccl_device_headers.sh
 * compiles this file with nvcc (device code for one architecture) and g++ (host side only).
 * Never launched: Weft creates no device communicators yet. */
#include <nccl.h>
#include <nccl_device.h>

#include <vector>

#ifdef __CUDACC__
#include <cuda_fp16.h>

/* out[i] = sum over LSA peers of their in[i], then a barrier so no peer reuses in early. */
template <typename T>
__global__ void lsaSum(ncclWindow_t in, size_t inOffset, ncclWindow_t out, size_t outOffset, size_t count,
                       ncclDevComm devComm) {
  ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), devComm, ncclTeamLsa(devComm), devComm.lsaBarrier,
                                         blockIdx.x};
  bar.sync(ncclCoopCta(), cuda::memory_order_acquire);
  ncclTeam lsa = ncclTeamLsa(devComm);
  T* mine = (T*)ncclGetLocalPointer(out, outOffset);
  for (size_t i = threadIdx.x + (size_t)blockIdx.x * blockDim.x; i < count;
       i += (size_t)blockDim.x * gridDim.x) {
    T sum = T(0);
    for (int p = 0; p < lsa.nRanks; p++) sum = sum + ((T*)ncclGetLsaPointer(in, inOffset, p))[i];
    mine[i] = sum;
  }
  bar.sync(ncclCoopCta(), cuda::memory_order_release);
}

template <typename T>
__global__ void multimemCopy(ncclWindow_t in, size_t inOffset, ncclWindow_t out, size_t outOffset,
                             size_t count, ncclDevComm devComm) {
  ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), devComm, ncclTeamTagLsa(), blockIdx.x, true};
  bar.sync(ncclCoopCta(), cuda::memory_order_relaxed);
  T* src = (T*)ncclGetLsaMultimemPointer(in, inOffset, devComm);
  T* dst = (T*)ncclGetLsaMultimemPointer(out, outOffset, devComm);
  for (size_t i = threadIdx.x; i < count; i += blockDim.x) dst[i] = src[i];
  bar.sync(ncclCoopCta(), cuda::memory_order_release);
}

/* Each rank puts its block r to world rank r, over GIN for ranks outside its LSA team. */
template <typename T>
__global__ void hybridAllToAll(ncclWindow_t in, size_t inOffset, ncclWindow_t out, size_t outOffset,
                               size_t count, ncclDevComm devComm) {
  ncclGin gin{devComm, 0};
  uint64_t before = gin.readSignal(blockIdx.x);
  ncclBarrierSession<ncclCoopCta> bar{ncclCoopCta(), ncclTeamTagWorld(), gin, blockIdx.x};
  bar.sync(ncclCoopCta(), cuda::memory_order_acquire, ncclGinFenceLevel::Relaxed);
  ncclTeam world = ncclTeamWorld(devComm), lsa = ncclTeamLsa(devComm);
  int lsa0 = world.rank - lsa.rank;
  size_t bytes = count * sizeof(T);
  for (int r = threadIdx.x; r < world.nRanks; r += blockDim.x) {
    if (r >= lsa0 && r < lsa0 + lsa.nRanks) {
      T* dst =
          (T*)ncclGetLsaPointer(out, outOffset, ncclTeamRankToLsa(devComm, world, r)) + world.rank * count;
      const T* src = (const T*)ncclGetLocalPointer(in, inOffset) + r * count;
      for (size_t i = 0; i < count; i++) dst[i] = src[i];
    } else {
      gin.put(world, r, out, outOffset + world.rank * bytes, in, inOffset + r * bytes, bytes,
              ncclGin_SignalInc{blockIdx.x});
    }
  }
  if (blockIdx.x == 0) gin.waitSignal(ncclCoopCta(), 0, before + world.nRanks - lsa.nRanks);
  gin.flush(ncclCoopCta());
  bar.sync(ncclCoopCta(), cuda::memory_order_release, ncclGinFenceLevel::Put | ncclGinFenceLevel::Get);
}

template <typename T>
static void launchAll(ncclWindow_t in, ncclWindow_t out, ncclDevComm const& devComm, cudaStream_t stream) {
  lsaSum<T><<<4, 512, 0, stream>>>(in, 0, out, 0, 1024, devComm);
  multimemCopy<T><<<4, 512, 0, stream>>>(in, 0, out, 0, 1024, devComm);
  hybridAllToAll<T><<<4, 512, 0, stream>>>(in, 0, out, 0, 16, devComm);
}
#endif

int main(int argc, char** argv) {
  (void)argv;
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 4;
  reqs.lsaMultimem = true;
  reqs.barrierCount = 4;
  reqs.ginSignalCount = 4;
  reqs.ginConnectionType = NCCL_GIN_CONNECTION_FULL;
  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  std::vector<ncclDevComm> devComms(2);
  if (argc > 99) { /* referenced, never reached */
    ncclComm_t comm = NCCL_COMM_NULL;
    if (ncclCommQueryProperties(comm, &props) != ncclSuccess || props.ginType == NCCL_GIN_TYPE_NONE) return 1;
    if (ncclDevCommCreate(comm, &reqs, &devComms[0]) != ncclSuccess) return 1;
#ifdef __CUDACC__
    launchAll<float>(NULL, NULL, devComms[0], NULL);
    launchAll<half>(NULL, NULL, devComms[0], NULL);
    launchAll<int8_t>(NULL, NULL, devComms[0], NULL);
#endif
    ncclDevCommDestroy(comm, &devComms[0]);
  }
  return 0;
}
