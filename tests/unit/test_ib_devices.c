/* InfiniBand discovery against the test verbs provider (tests/ibemu): active ports only,
 * NCCL_IB_HCA's prefixes, exact names, exclusions and ports, NCCL's RoCE GID choice, and a
 * machine without libibverbs. Discovery runs once per process, so each case runs in a child. */
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "transport/net_ib.h"

static char provider[PATH_MAX];

/* "mlx5_0:1:ib:g0,..." for the ports discovered, with speed and MTU checked on the way. */
static void describe(char* out, size_t size) {
  const struct weft_ib_port* p;
  int n = -1;
  out[0] = 0;
  if (weft_ib_ports(&p, &n) != ncclSuccess) snprintf(out, size, "error");
  for (int i = 0; i < n; i++) {
    int ok = p[i].ethernet ? p[i].speed_mbps == 100000 && p[i].mtu == 1024
                           : p[i].speed_mbps == 200000 && p[i].mtu == 4096 && p[i].lid > 0;
    size_t len = strlen(out);
    snprintf(out + len, size - len, "%s%s:%d:%s:g%d%s", i ? "," : "", p[i].name, p[i].port,
             p[i].ethernet ? "eth" : "ib", p[i].gid_index, ok ? "" : ":bad-attrs");
  }
}

/* Runs discovery in a child with env ("NAME=value" entries, NULL-terminated) and checks what it found. */
static void expect_ports(const char* const* env, const char* devices, const char* want) {
  pid_t pid = fork();
  if (pid == 0) {
    setenv("WEFT_IBVERBS_LIB", provider, 1);
    if (devices) setenv("WEFT_FAKE_IB_DEVICES", devices, 1);
    for (int i = 0; env && env[i]; i++) putenv((char*)env[i]);
    char got[1024];
    describe(got, sizeof(got));
    if (strcmp(got, want) == 0) _exit(0);
    fprintf(stderr, "FAILED: devices %s, env %s: found \"%s\", expected \"%s\"\n", devices ? devices : "-",
            env && env[0] ? env[0] : "-", got, want);
    _exit(1);
  }
  int status = 0;
  EXPECT(waitpid(pid, &status, 0) == pid);
  EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

#define ENV(...) ((const char* const[]){__VA_ARGS__, NULL})

static const char* machine = "mlx5_0,mlx5_1:eth,mlx5_2:ib:2,mlx5_3:eth:1:down,mlx5_10";

static void test_selection(void) {
  expect_ports(NULL, machine, "mlx5_0:1:ib:g0,mlx5_1:1:eth:g2,mlx5_2:1:ib:g0,mlx5_2:2:ib:g0,mlx5_10:1:ib:g0");
  expect_ports(ENV("NCCL_IB_HCA=mlx5_2:2"), machine, "mlx5_2:2:ib:g0");
  expect_ports(ENV("NCCL_IB_HCA=mlx5_1,mlx5_2:1"), machine, "mlx5_1:1:eth:g2,mlx5_2:1:ib:g0,mlx5_10:1:ib:g0");
  expect_ports(ENV("NCCL_IB_HCA==mlx5_1"), machine, "mlx5_1:1:eth:g2");
  expect_ports(ENV("NCCL_IB_HCA=^mlx5_0,mlx5_2:1"), machine,
               "mlx5_1:1:eth:g2,mlx5_2:2:ib:g0,mlx5_10:1:ib:g0");
  expect_ports(ENV("NCCL_IB_HCA=^=mlx5_1"), machine,
               "mlx5_0:1:ib:g0,mlx5_2:1:ib:g0,mlx5_2:2:ib:g0,mlx5_10:1:ib:g0");
  expect_ports(ENV("NCCL_IB_HCA=mlx5_3"), machine, ""); /* its port is down */
  expect_ports(ENV("NCCL_IB_HCA=="), machine, "");
  expect_ports(ENV("NCCL_IB_DISABLE=1"), machine, "");
}

/* The second Ethernet device's GIDs: [1] 127.0.2.1 v1, [2] 127.0.2.1 v2, [3] fd00::1:1 v2, [4] 192.168.1.1
 * v2. */
static void test_roce_gid(void) {
  const char* eth = "mlx5_0:eth,mlx5_1:eth";
  expect_ports(NULL, eth, "mlx5_0:1:eth:g2,mlx5_1:1:eth:g2");
  expect_ports(ENV("NCCL_IB_ROCE_VERSION_NUM=1"), eth, "mlx5_0:1:eth:g1,mlx5_1:1:eth:g1");
  expect_ports(ENV("NCCL_IB_ADDR_FAMILY=AF_INET6"), eth, "mlx5_0:1:eth:g3,mlx5_1:1:eth:g3");
  expect_ports(ENV("NCCL_IB_ADDR_RANGE=192.168.0.0/16"), eth, "mlx5_0:1:eth:g4,mlx5_1:1:eth:g4");
  expect_ports(ENV("NCCL_IB_ADDR_RANGE=127.0.2.0/24"), eth, "mlx5_0:1:eth:g0,mlx5_1:1:eth:g2");
  expect_ports(ENV("NCCL_IB_GID_INDEX=3"), eth, "mlx5_0:1:eth:g3,mlx5_1:1:eth:g3");
}

static void test_without_verbs(void) {
  /* The library is missing: no ports, no error (a machine without rdma-core). */
  pid_t pid = fork();
  if (pid == 0) {
    setenv("WEFT_IBVERBS_LIB", "libweft-no-such-verbs.so.1", 1);
    const struct weft_ib_port* p;
    int n = -1;
    _exit(weft_ib_ports(&p, &n) == ncclSuccess && n == 0 ? 0 : 1);
  }
  int status = 0;
  EXPECT(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void) {
#if !WEFT_IBVERBS_HEADERS
  printf("SKIP: built without <infiniband/verbs.h>\n");
  return 77;
#endif
  char self[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) return 1;
  self[len] = 0;
  snprintf(provider, sizeof(provider), "%s/../lib/libweft_fake_verbs.so", dirname(self));
  if (access(provider, R_OK) != 0) {
    printf("SKIP: no test verbs provider at %s\n", provider);
    return 77;
  }
  test_selection();
  test_roce_gid();
  test_without_verbs();
  return test_finish("test_ib_devices");
}
