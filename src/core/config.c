/* ncclConfig_t as NCCL reads it: copy what the caller's header knew, check the magic, reset
 * fields its version predates, validate, then let environment variables override. */
#include "core/config.h"

#include <string.h>

#include "util/log.h"
#include "util/param.h"

#define CONFIG_MAGIC NCCL_API_MAGIC
#define MAX_CTAS 64

static void set_defaults(ncclConfig_t* c) {
  ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
  *c = init;
}

/* Fields a header older than a given version did not have are reset to "undefined". */
static void apply_version_gates(ncclConfig_t* c, unsigned version) {
  if (version < NCCL_VERSION(2, 14, 0)) c->blocking = NCCL_CONFIG_UNDEF_INT;
  if (version < NCCL_VERSION(2, 17, 0)) {
    c->cgaClusterSize = c->minCTAs = c->maxCTAs = NCCL_CONFIG_UNDEF_INT;
    c->netName = NULL;
  }
  if (version < NCCL_VERSION(2, 18, 0)) c->splitShare = NCCL_CONFIG_UNDEF_INT;
  if (version < NCCL_VERSION(2, 25, 0)) c->trafficClass = NCCL_CONFIG_UNDEF_INT;
  if (version < NCCL_VERSION(2, 27, 0)) {
    c->commName = NULL;
    c->collnetEnable = c->CTAPolicy = c->shrinkShare = c->nvlsCTAs = NCCL_CONFIG_UNDEF_INT;
  }
  if (version < NCCL_VERSION(2, 28, 0))
    c->nChannelsPerNetPeer = c->nvlinkCentricSched = NCCL_CONFIG_UNDEF_INT;
  if (version < NCCL_VERSION(2, 29, 0)) {
    c->graphUsageMode = c->numRmaCtx = c->maxP2pPeers = c->graphStreamOrdering = NCCL_CONFIG_UNDEF_INT;
    c->launchOrderImplicit = c->numRmaSig = c->rmaEagerInit = NCCL_CONFIG_UNDEF_INT;
    c->hostCftMode = c->nvlsHostMode = NCCL_CONFIG_UNDEF_INT;
  }
}

static void env_override(ncclConfig_t* c) {
  static const struct {
    const char* name;
    size_t offset;
  } ints[] = {
      {"NCCL_COMM_BLOCKING", offsetof(ncclConfig_t, blocking)},
      {"NCCL_CGA_CLUSTER_SIZE", offsetof(ncclConfig_t, cgaClusterSize)},
      {"NCCL_MIN_CTAS", offsetof(ncclConfig_t, minCTAs)},
      {"NCCL_MAX_CTAS", offsetof(ncclConfig_t, maxCTAs)},
      {"NCCL_COMM_SPLIT_SHARE_RESOURCES", offsetof(ncclConfig_t, splitShare)},
      {"NCCL_CTA_POLICY", offsetof(ncclConfig_t, CTAPolicy)},
  };
  for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
    if (!weft_param_is_set(ints[i].name)) continue;
    int v = (int)weft_param_int(ints[i].name);
    memcpy((char*)c + ints[i].offset, &v, sizeof(v));
    WEFT_INFO(WEFT_ENV, "%s set by environment to %d", ints[i].name, v);
  }
  if (weft_param_is_set("NCCL_NET")) c->netName = weft_param_str("NCCL_NET");
}

static void fill_undefined(ncclConfig_t* c) {
  if (c->blocking == NCCL_CONFIG_UNDEF_INT) c->blocking = 1;
  if (c->cgaClusterSize == NCCL_CONFIG_UNDEF_INT) c->cgaClusterSize = 4;
  if (c->minCTAs == NCCL_CONFIG_UNDEF_INT) c->minCTAs = 1;
  if (c->maxCTAs == NCCL_CONFIG_UNDEF_INT) c->maxCTAs = MAX_CTAS;
  if (c->splitShare == NCCL_CONFIG_UNDEF_INT) c->splitShare = 0;
  if (c->collnetEnable == NCCL_CONFIG_UNDEF_INT) c->collnetEnable = 0;
  if (c->CTAPolicy == NCCL_CONFIG_UNDEF_INT) c->CTAPolicy = NCCL_CTA_POLICY_DEFAULT;
  if (c->shrinkShare == NCCL_CONFIG_UNDEF_INT) c->shrinkShare = 0;
  if (c->nvlinkCentricSched == NCCL_CONFIG_UNDEF_INT) c->nvlinkCentricSched = 0;
}

#define CHECK_RANGE(field, lo, hi)                                                                    \
  do {                                                                                                \
    if (c->field != NCCL_CONFIG_UNDEF_INT && (c->field < (lo) || c->field > (hi))) {                  \
      WEFT_WARN("Invalid config " #field " %d: must be in [%d, %d]", c->field, (int)(lo), (int)(hi)); \
      return ncclInvalidArgument;                                                                     \
    }                                                                                                 \
  } while (0)

static ncclResult_t validate(const ncclConfig_t* c) {
  CHECK_RANGE(blocking, 0, 1);
  CHECK_RANGE(cgaClusterSize, 0, 8);
  CHECK_RANGE(minCTAs, 1, MAX_CTAS);
  CHECK_RANGE(maxCTAs, 1, MAX_CTAS);
  CHECK_RANGE(splitShare, 0, 1);
  CHECK_RANGE(shrinkShare, 0, 1);
  CHECK_RANGE(collnetEnable, 0, 1);
  CHECK_RANGE(nvlinkCentricSched, 0, 1);
  CHECK_RANGE(CTAPolicy, 0, 2);
  CHECK_RANGE(nChannelsPerNetPeer, 1, 64);
  if (c->minCTAs != NCCL_CONFIG_UNDEF_INT && c->maxCTAs != NCCL_CONFIG_UNDEF_INT && c->minCTAs > c->maxCTAs) {
    WEFT_WARN("Invalid config minCTAs %d greater than maxCTAs %d", c->minCTAs, c->maxCTAs);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

ncclResult_t weft_config_parse(const ncclConfig_t* user, ncclConfig_t* out) {
  set_defaults(out);
  if (user != NULL) {
    size_t size = user->size;
    if (user->magic != CONFIG_MAGIC) {
      WEFT_WARN(
          "Invalid config magic 0x%x (expected 0x%x): was the config initialized with "
          "NCCL_CONFIG_INITIALIZER?",
          user->magic, CONFIG_MAGIC);
      return ncclInvalidArgument;
    }
    if (size < offsetof(ncclConfig_t, blocking)) {
      WEFT_WARN("Invalid config size %zu", size);
      return ncclInvalidArgument;
    }
    memcpy(out, user, size < sizeof(*out) ? size : sizeof(*out));
    apply_version_gates(out, user->version);
    out->size = sizeof(*out);
  }
  env_override(out);
  ncclResult_t res = validate(out);
  if (res != ncclSuccess) return res;
  fill_undefined(out);
  return ncclSuccess;
}
