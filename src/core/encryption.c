/* ncclSetEncryption: the process-wide choice between clear sockets and TLS 1.3 with a
 * pre-shared key. Communicators created afterwards use it; existing ones keep theirs. */
#include <stddef.h>

#include "core/api.h"
#include "util/log.h"
#include "util/psk.h"

static int valid_psk(const char* psk) { return psk != NULL && psk[0] != 0; }

WEFT_API(ncclResult_t, ncclSetEncryption, const ncclEncryptionConfig_t* config) {
  if (config == NULL) {
    WEFT_WARN("ncclSetEncryption: config is NULL");
    return ncclInvalidArgument;
  }
  if (config->size < offsetof(ncclEncryptionConfig_t, psk) + sizeof(config->psk)) {
    WEFT_WARN(
        "ncclSetEncryption: config size %zu is too small (initialize it with "
        "NCCL_ENCRYPTION_CONFIG_INITIALIZER)",
        config->size);
    return ncclInvalidArgument;
  }
  if (config->magic != NCCL_API_MAGIC) {
    WEFT_WARN(
        "ncclSetEncryption: config magic 0x%x is wrong (initialize it with "
        "NCCL_ENCRYPTION_CONFIG_INITIALIZER)",
        config->magic);
    return ncclInvalidArgument;
  }
  switch (config->mode) {
    case NCCL_ENCRYPTION_MODE_NONE:
      return weft_psk_set(NULL);
    case NCCL_ENCRYPTION_MODE_PSK:
      if (!valid_psk(config->psk)) {
        WEFT_WARN("ncclSetEncryption: mode NCCL_ENCRYPTION_MODE_PSK needs a non-empty psk");
        return ncclInvalidArgument;
      }
      return weft_psk_set(config->psk);
    default:
      WEFT_WARN("ncclSetEncryption: mode %d is not NCCL_ENCRYPTION_MODE_NONE (0) or _PSK (1)", config->mode);
      return ncclInvalidArgument;
  }
}
