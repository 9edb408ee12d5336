/* Emulated CUDA runtime: the per-thread last error, error names and strings, versions and the
 * driver entry points (the few emulated driver functions are in rt_driver.c). */
#include <stddef.h>

#include "rt.h"

static __thread cudaError_t last_error = cudaSuccess;

cudaError_t rt_error(cudaError_t err) {
  if (err != cudaSuccess) last_error = err;
  return err;
}

RT_API cudaError_t cudaGetLastError(void) {
  cudaError_t err = last_error;
  last_error = cudaSuccess;
  return err;
}

RT_API cudaError_t cudaPeekAtLastError(void) { return last_error; }

struct error_text {
  cudaError_t code;
  const char* name;
  const char* text;
};

#define E(code, text) \
  { code, #code, text }
static const struct error_text errors[] = {
    E(cudaSuccess, "no error"),
    E(cudaErrorInvalidValue, "invalid argument"),
    E(cudaErrorMemoryAllocation, "out of memory"),
    E(cudaErrorInitializationError, "initialization error"),
    E(cudaErrorCudartUnloading, "driver shutting down"),
    E(cudaErrorInvalidConfiguration, "invalid configuration argument"),
    E(cudaErrorInvalidPitchValue, "invalid pitch argument"),
    E(cudaErrorInvalidSymbol, "invalid device symbol"),
    E(cudaErrorInvalidHostPointer, "invalid host pointer"),
    E(cudaErrorInvalidDevicePointer, "invalid device pointer"),
    E(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy"),
    E(cudaErrorSynchronizationError, "incorrect use of __syncthreads()"),
    E(cudaErrorNotYetImplemented, "feature not yet implemented"),
    E(cudaErrorStubLibrary, "CUDA driver is a stub library"),
    E(cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime version"),
    E(cudaErrorCallRequiresNewerDriver, "API call is not supported in the installed CUDA driver"),
    E(cudaErrorDevicesUnavailable, "CUDA-capable device(s) is/are busy or unavailable"),
    E(cudaErrorMissingConfiguration, "__global__ function call is not configured"),
    E(cudaErrorPriorLaunchFailure, "unspecified launch failure in prior launch"),
    E(cudaErrorInvalidDeviceFunction, "invalid device function"),
    E(cudaErrorNoDevice, "no CUDA-capable device is detected"),
    E(cudaErrorInvalidDevice, "invalid device ordinal"),
    E(cudaErrorStartupFailure, "device kernel image is invalid"),
    E(cudaErrorInvalidKernelImage, "device kernel image is invalid"),
    E(cudaErrorDeviceUninitialized, "invalid device context"),
    E(cudaErrorMapBufferObjectFailed, "mapping of buffer object failed"),
    E(cudaErrorUnmapBufferObjectFailed, "unmapping of buffer object failed"),
    E(cudaErrorAlreadyMapped, "resource already mapped"),
    E(cudaErrorNoKernelImageForDevice, "no kernel image is available for execution on the device"),
    E(cudaErrorNotMapped, "resource not mapped"),
    E(cudaErrorUnsupportedLimit, "limit is not supported on this architecture"),
    E(cudaErrorDeviceAlreadyInUse, "exclusive-thread device already in use by a different thread"),
    E(cudaErrorPeerAccessUnsupported, "peer access is not supported between these two devices"),
    E(cudaErrorInvalidPtx, "a PTX JIT compilation failed"),
    E(cudaErrorFileNotFound, "file not found"),
    E(cudaErrorSharedObjectSymbolNotFound, "shared object symbol not found"),
    E(cudaErrorSharedObjectInitFailed, "shared object initialization failed"),
    E(cudaErrorOperatingSystem, "OS call failed or operation not supported on this OS"),
    E(cudaErrorInvalidResourceHandle, "invalid resource handle"),
    E(cudaErrorIllegalState, "the operation cannot be performed in the present state"),
    E(cudaErrorSymbolNotFound, "named symbol not found"),
    E(cudaErrorNotReady, "device not ready"),
    E(cudaErrorIllegalAddress, "an illegal memory access was encountered"),
    E(cudaErrorLaunchOutOfResources, "too many resources requested for launch"),
    E(cudaErrorLaunchTimeout, "the launch timed out and was terminated"),
    E(cudaErrorPeerAccessAlreadyEnabled, "peer access is already enabled"),
    E(cudaErrorPeerAccessNotEnabled, "peer access has not been enabled"),
    E(cudaErrorSetOnActiveProcess, "cannot set while device is active in this process"),
    E(cudaErrorContextIsDestroyed, "context is destroyed"),
    E(cudaErrorAssert, "device-side assert triggered"),
    E(cudaErrorTooManyPeers, "peer mapping resources exhausted"),
    E(cudaErrorHostMemoryAlreadyRegistered, "part or all of the requested memory range is already mapped"),
    E(cudaErrorHostMemoryNotRegistered, "pointer does not correspond to a registered memory region"),
    E(cudaErrorHardwareStackError, "hardware stack error"),
    E(cudaErrorIllegalInstruction, "an illegal instruction was encountered"),
    E(cudaErrorMisalignedAddress, "misaligned address"),
    E(cudaErrorInvalidAddressSpace, "operation not supported on global/shared address space"),
    E(cudaErrorInvalidPc, "invalid program counter"),
    E(cudaErrorLaunchFailure, "unspecified launch failure"),
    E(cudaErrorCooperativeLaunchTooLarge, "too many blocks in cooperative launch"),
    E(cudaErrorNotPermitted, "operation not permitted"),
    E(cudaErrorNotSupported, "operation not supported"),
    E(cudaErrorSystemNotReady, "system not yet initialized"),
    E(cudaErrorSystemDriverMismatch, "system has unsupported display driver / cuda driver combination"),
    E(cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing"),
    E(cudaErrorStreamCaptureInvalidated, "operation failed due to a previous error during capture"),
    E(cudaErrorStreamCaptureMerge, "operation would result in a merge of separate capture sequences"),
    E(cudaErrorStreamCaptureUnmatched, "capture was not ended in the same stream as it began"),
    E(cudaErrorStreamCaptureUnjoined, "capturing stream has unjoined work"),
    E(cudaErrorStreamCaptureIsolation, "dependency created on uncaptured work in another stream"),
    E(cudaErrorStreamCaptureImplicit,
      "operation would make the legacy stream depend on a capturing blocking stream"),
    E(cudaErrorCapturedEvent, "operation not permitted on an event last recorded in a capturing stream"),
    E(cudaErrorStreamCaptureWrongThread,
      "attempt to terminate a thread-local capture sequence from another thread"),
    E(cudaErrorTimeout, "wait operation timed out"),
    E(cudaErrorGraphExecUpdateFailure,
      "the graph update was not performed because it included changes which violated constraints specific to "
      "instantiated graph update"),
    E(cudaErrorInvalidClusterSize, "invalid cluster size"),
    E(cudaErrorFunctionNotLoaded, "function not loaded"),
    E(cudaErrorUnknown, "unknown error"),
};
#undef E

static const struct error_text* find_error(cudaError_t err) {
  for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
    if (errors[i].code == err) return &errors[i];
  return NULL;
}

RT_API const char* cudaGetErrorName(cudaError_t err) {
  const struct error_text* e = find_error(err);
  return e ? e->name : "unrecognized error code";
}

RT_API const char* cudaGetErrorString(cudaError_t err) {
  const struct error_text* e = find_error(err);
  return e ? e->text : "unrecognized error code";
}

RT_API cudaError_t cudaDriverGetVersion(int* v) {
  if (!v) return rt_error(cudaErrorInvalidValue);
  *v = CUDART_VERSION;
  return cudaSuccess;
}

RT_API cudaError_t cudaRuntimeGetVersion(int* v) {
  if (!v) return rt_error(cudaErrorInvalidValue);
  *v = CUDART_VERSION;
  return cudaSuccess;
}

/* There is no driver library behind the emulator: rt_driver.c emulates the few driver functions
 * Weft asks for; for any other symbol, code that would call the driver API directly must take its
 * runtime-only path. */
static cudaError_t entry_point(const char* symbol, void** fn, unsigned int version,
                               enum cudaDriverEntryPointQueryResult* status) {
  enum cudaDriverEntryPointQueryResult st;
  void* found = rt_driver_symbol(symbol, version, &st);
  if (status) *status = st;
  if (st == cudaDriverEntryPointSymbolNotFound) {
    if (fn) *fn = NULL;
    return rt_error(cudaErrorNotSupported);
  }
  if (!fn) return rt_error(cudaErrorInvalidValue);
  *fn = found; /* NULL, with cudaSuccess, when the symbol is newer than the version asked for */
  return cudaSuccess;
}

/* Without a version: the newest ABI of the symbol, the runtime's own version. */
RT_API cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** fn, unsigned long long flags,
                                           enum cudaDriverEntryPointQueryResult* status) {
  (void)flags;
  return entry_point(symbol, fn, CUDART_VERSION, status);
}

RT_API cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int version,
                                                    unsigned long long flags,
                                                    enum cudaDriverEntryPointQueryResult* status) {
  (void)flags;
  return entry_point(symbol, fn, version, status);
}
