/* Compile-time ABI check: built with NVIDIA's nccl.h only, it asserts every value Weft's header
 * gave to abi_dump (abi_expect.h, generated) and redeclares every function with Weft's prototype
 * (weft_protos.h, extracted from include/nccl.h): any difference stops the build. */
#include <nccl.h>
#include <stdio.h>
#include <string.h>

#include "abi_common.h"

#ifdef WEFT_VERSION_STRING
#error "test_abi_static must be compiled with NVIDIA's nccl.h, not Weft's"
#endif

/* Conflicting types for any nccl* function whose prototype differs from NVIDIA's. */
#include "weft_protos.h"

static int checks, failures;

#define ABI_STATIC(e, v)                                                          \
  _Static_assert((long long)(e) == (long long)(v), "Weft's nccl.h differs: " #e); \
  checks++;
#define ABI_RUNTIME(e, v)                                                                              \
  checks++;                                                                                            \
  if ((long long)(e) != (long long)(v)) {                                                              \
    fprintf(stderr, "FAILED: %s is %lld with NVIDIA's header, %lld with Weft's\n", #e, (long long)(e), \
            (long long)(v));                                                                           \
    failures++;                                                                                        \
  }

int main(void) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  ncclCollConfig_t coll = NCCL_COLLCONFIG_INITIALIZER;
  ncclEncryptionConfig_t enc = NCCL_ENCRYPTION_CONFIG_INITIALIZER;
#include "abi_expect.h"
  (void)cfg;
  (void)sim;
  (void)coll;
  (void)enc;
  if (checks < 150) {
    fprintf(stderr, "FAILED: only %d ABI checks were generated\n", checks);
    return 1;
  }
  printf("test_abi_static: %d ABI checks (%d at run time failed)\n", checks, failures);
  return failures ? 1 : 0;
}
