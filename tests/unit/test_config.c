/* ncclConfig_t parsing: defaults, older headers (smaller size, older version), bad magic,
 * out-of-range fields, environment overrides. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/config.h"

static void test_defaults(void) {
  ncclConfig_t out;
  EXPECT_EQ_INT(weft_config_parse(NULL, &out), ncclSuccess);
  EXPECT_EQ_INT(out.blocking, 1);
  EXPECT_EQ_INT(out.cgaClusterSize, 4);
  EXPECT_EQ_INT(out.minCTAs, 1);
  EXPECT_EQ_INT(out.maxCTAs, 64);
  EXPECT_EQ_INT(out.splitShare, 0);
  EXPECT_EQ_INT(out.CTAPolicy, NCCL_CTA_POLICY_DEFAULT);
  ncclConfig_t given = NCCL_CONFIG_INITIALIZER;
  given.blocking = 0;
  given.maxCTAs = 8;
  EXPECT_EQ_INT(weft_config_parse(&given, &out), ncclSuccess);
  EXPECT_EQ_INT(out.blocking, 0);
  EXPECT_EQ_INT(out.maxCTAs, 8);
}

/* A caller built against a 2.14 header passes a struct that ends after blocking; whatever
 * follows in memory must not be read, and fields newer than 2.14 get their defaults. */
static void test_older_header(void) {
  struct {
    ncclConfig_t cfg;
    char garbage[64];
  } buf;
  memset(&buf, 0x5a, sizeof(buf));
  buf.cfg.size = offsetof(ncclConfig_t, cgaClusterSize);
  buf.cfg.magic = 0xcafebeef;
  buf.cfg.version = NCCL_VERSION(2, 14, 0);
  buf.cfg.blocking = 0;
  ncclConfig_t out;
  EXPECT_EQ_INT(weft_config_parse(&buf.cfg, &out), ncclSuccess);
  EXPECT_EQ_INT(out.blocking, 0);
  EXPECT_EQ_INT(out.cgaClusterSize, 4);
  EXPECT_EQ_INT(out.minCTAs, 1);
  EXPECT_EQ_INT(out.maxCTAs, 64);
  EXPECT(out.netName == NULL);
  EXPECT_EQ_INT(out.size, sizeof(ncclConfig_t));

  /* Full-size struct but an older version: fields the version predates are reset. */
  ncclConfig_t old = NCCL_CONFIG_INITIALIZER;
  old.version = NCCL_VERSION(2, 20, 0);
  old.CTAPolicy = 5; /* invalid, but 2.20 did not know the field: must be ignored */
  EXPECT_EQ_INT(weft_config_parse(&old, &out), ncclSuccess);
  EXPECT_EQ_INT(out.CTAPolicy, NCCL_CTA_POLICY_DEFAULT);
}

/* A caller built against CUDA's 2.28.9 header passes an 80-byte struct: the 2.29-2.32 fields
 * after nvlinkCentricSched are not read. One built against 2.32 with an older version number
 * gets those fields reset. */
static void test_228_header(void) {
  struct {
    ncclConfig_t cfg;
    char garbage[64];
  } buf;
  memset(&buf, 0x5a, sizeof(buf));
  ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
  memcpy(&buf.cfg, &init, offsetof(ncclConfig_t, graphUsageMode));
  buf.cfg.size = offsetof(ncclConfig_t, graphUsageMode);
  buf.cfg.version = NCCL_VERSION(2, 28, 9);
  buf.cfg.nvlinkCentricSched = 1;
  EXPECT_EQ_INT((int)buf.cfg.size, 80);
  ncclConfig_t out;
  EXPECT_EQ_INT(weft_config_parse(&buf.cfg, &out), ncclSuccess);
  EXPECT_EQ_INT(out.nvlinkCentricSched, 1);
  EXPECT_EQ_INT(out.graphUsageMode, NCCL_CONFIG_UNDEF_INT);
  EXPECT_EQ_INT(out.nvlsHostMode, NCCL_CONFIG_UNDEF_INT);
  EXPECT_EQ_INT(out.hostCftMode, NCCL_CONFIG_UNDEF_INT);

  ncclConfig_t mixed = NCCL_CONFIG_INITIALIZER;
  mixed.version = NCCL_VERSION(2, 28, 9);
  mixed.maxP2pPeers = 7;
  EXPECT_EQ_INT(weft_config_parse(&mixed, &out), ncclSuccess);
  EXPECT_EQ_INT(out.maxP2pPeers, NCCL_CONFIG_UNDEF_INT);
  mixed.version = NCCL_VERSION_CODE;
  EXPECT_EQ_INT(weft_config_parse(&mixed, &out), ncclSuccess);
  EXPECT_EQ_INT(out.maxP2pPeers, 7);
}

static void test_rejects(void) {
  ncclConfig_t out;
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0x12345678;
  EXPECT_EQ_INT(weft_config_parse(&bad, &out), ncclInvalidArgument);
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.blocking = 2;
  EXPECT_EQ_INT(weft_config_parse(&c, &out), ncclInvalidArgument);
  c = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
  c.minCTAs = 8;
  c.maxCTAs = 4;
  EXPECT_EQ_INT(weft_config_parse(&c, &out), ncclInvalidArgument);
  c = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
  c.CTAPolicy = 3;
  EXPECT_EQ_INT(weft_config_parse(&c, &out), ncclInvalidArgument);
  c = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
  c.nChannelsPerNetPeer = 65;
  EXPECT_EQ_INT(weft_config_parse(&c, &out), ncclInvalidArgument);
}

static void test_env_override(void) {
  ncclConfig_t out;
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.blocking = 1;
  setenv("NCCL_COMM_BLOCKING", "0", 1);
  setenv("NCCL_MAX_CTAS", "3", 1);
  EXPECT_EQ_INT(weft_config_parse(&c, &out), ncclSuccess);
  EXPECT_EQ_INT(out.blocking, 0);
  EXPECT_EQ_INT(out.maxCTAs, 3);
  setenv("NCCL_MAX_CTAS", "999", 1);
  EXPECT_EQ_INT(weft_config_parse(&c, &out), ncclInvalidArgument);
  unsetenv("NCCL_COMM_BLOCKING");
  unsetenv("NCCL_MAX_CTAS");
}

int main(void) {
  test_defaults();
  test_older_header();
  test_228_header();
  test_rejects();
  test_env_override();
  return test_finish("test_config");
}
