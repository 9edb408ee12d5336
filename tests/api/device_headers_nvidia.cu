/* Weft's nccl.h under NVIDIA's own nccl_device.h (NVIDIA_NCCL_DEVICE_H, an explicit path): the
 * device API of NCCL 2.32.3 (or of CUDA's 2.28.9) must compile on top of Weft's nccl.h, so
 * nccl.h must define nothing those headers define. test_nccl_device_headers.sh compiles it. */
#include <nccl.h>
#include NVIDIA_NCCL_DEVICE_H

__global__ void lsaCopy(ncclWindow_t in, ncclWindow_t out, size_t count, ncclDevComm devComm) {
  ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), devComm, ncclTeamLsa(devComm), devComm.lsaBarrier,
                                         blockIdx.x};
  bar.sync(ncclCoopCta(), cuda::memory_order_acquire);
  int peer = (devComm.lsaRank + 1) % ncclTeamLsa(devComm).nRanks;
  float* src = (float*)ncclGetLsaPointer(in, 0, peer);
  float* dst = (float*)ncclGetLocalPointer(out, 0);
  for (size_t i = threadIdx.x; i < count; i += blockDim.x) dst[i] = src[i];
  bar.sync(ncclCoopCta(), cuda::memory_order_release);
}

int main(int argc, char** argv) {
  (void)argv;
  ncclDevComm devComm = {};
  if (argc > 99) lsaCopy<<<1, 256>>>(NULL, NULL, 0, devComm); /* never reached */
  return 0;
}
