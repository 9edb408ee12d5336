/* Compiled by test_nccl_device_headers.sh as C (gcc), C++ (g++) and CUDA (nvcc), with nccl.h
 * alone and, with -DWITH_DEVICE, nccl_device.h's host side, then linked to Weft's libnccl.so.2:
 * both headers must stand on their own and declare what the library exports. Never run. */
#include <nccl.h>
#ifdef WITH_DEVICE
#include <nccl_device.h>
#endif

int main(void) {
  int version = 0;
  ncclResult_t res = ncclGetVersion(&version);
#ifdef WITH_DEVICE
  ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  struct ncclDevComm devComm;
  ncclComm_t comm = NCCL_COMM_NULL;
  ncclLsaBarrierHandle_t barrier;
  ncclDevResourceRequirements_t resource;
  reqs.lsaBarrierCount = 1;
  if (ncclCommQueryProperties(comm, &props) == ncclSuccess && props.deviceApiSupport) {
    ncclTeam_t lsa = ncclTeamLsa(comm);
    res = ncclLsaBarrierCreateRequirement(lsa, 1, &barrier, &resource);
    if (res == ncclSuccess) res = ncclDevCommCreate(comm, &reqs, &devComm);
    if (res == ncclSuccess) res = ncclDevCommDestroy(comm, &devComm);
  }
#endif
  return res == ncclSuccess && version == NCCL_VERSION_CODE ? 0 : 1;
}
