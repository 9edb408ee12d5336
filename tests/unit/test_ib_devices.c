/* InfiniBand discovery against the test verbs provider (tests/ibemu): active ports only,
 * NCCL_IB_HCA's prefixes, exact names, exclusions and ports, NCCL's RoCE GID choice, the network
 * devices the ports make (one card's functions merged, NCCL_IB_MERGE_NICS), and a machine without
 * libibverbs. Discovery runs once per process, so each case runs in a child. */
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

/* "mlx5_0+mlx5_1/200@0000:1a:00.0,..." for the network devices: name, Gb/s, the last part of
 * the first member's PCI path ("-" unknown), with the members checked on the way. */
static void describe_devices(char* out, size_t size) {
  const struct weft_ib_device* d;
  int n = -1;
  out[0] = 0;
  if (weft_ib_devices(&d, &n) != ncclSuccess) snprintf(out, size, "error");
  for (int i = 0; i < n; i++) {
    int speed = 0, ok = d[i].nmembers >= 1 && d[i].nmembers <= WEFT_IB_MAX_MEMBERS;
    for (int k = 0; ok && k < d[i].nmembers; k++) speed += d[i].member[k]->speed_mbps;
    const char* pci = ok ? strrchr(d[i].member[0]->pci_path, '/') : NULL;
    size_t len = strlen(out);
    snprintf(out + len, size - len, "%s%s/%d@%s%s", i ? "," : "", d[i].name, d[i].speed_mbps / 1000,
             pci ? pci + 1 : "-", ok && speed == d[i].speed_mbps ? "" : ":bad-members");
  }
}

/* Runs discovery in a child with env ("NAME=value" entries, NULL-terminated) and checks what
 * how() says it found. The provider's sysfs tree must be gone afterwards. */
static void expect_found(const char* const* env, const char* devices, const char* want,
                         void (*how)(char*, size_t)) {
  char tmp[PATH_MAX];
  const char* base = getenv("TMPDIR");
  snprintf(tmp, sizeof(tmp), "%s/weft-test-ib.XXXXXX", base && base[0] ? base : "/tmp");
  EXPECT(mkdtemp(tmp) != NULL);
  pid_t pid = fork();
  if (pid == 0) {
    setenv("WEFT_IBVERBS_LIB", provider, 1);
    setenv("TMPDIR", tmp, 1);
    if (devices) setenv("WEFT_FAKE_IB_DEVICES", devices, 1);
    for (int i = 0; env && env[i]; i++) putenv((char*)env[i]);
    char got[1024];
    how(got, sizeof(got));
    if (strcmp(got, want) == 0) _exit(0);
    fprintf(stderr, "FAILED: devices %s, env %s: found \"%s\", expected \"%s\"\n", devices ? devices : "-",
            env && env[0] ? env[0] : "-", got, want);
    _exit(1);
  }
  int status = 0;
  EXPECT(waitpid(pid, &status, 0) == pid);
  EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT(rmdir(tmp) == 0); /* empty: the provider removed its tree */
}

static void expect_ports(const char* const* env, const char* devices, const char* want) {
  expect_found(env, devices, want, describe);
}

static void expect_devices(const char* const* env, const char* devices, const char* want) {
  expect_found(env, devices, want, describe_devices);
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

/* A card's functions (same PCI path but the function, same link layer) are one device, named
 * and summed as NCCL does, unless NCCL_IB_MERGE_NICS=0; other cards, another link layer, devices
 * whose PCI path is unknown, and a port NCCL_IB_HCA selects alone stay apart. */
static const char* cards = "mlx5_0@1a.0:eth,mlx5_1@1a.1:eth,mlx5_2@3b.0:eth,mlx5_3@1a.2,mlx5_4";

static void test_merge(void) {
  expect_devices(
      NULL, cards,
      "mlx5_0+mlx5_1/200@0000:1a:00.0,mlx5_2:1/100@0000:3b:00.0,mlx5_3:1/200@0000:1a:00.2,mlx5_4:1/200@-");
  expect_devices(ENV("NCCL_IB_MERGE_NICS=0"), cards,
                 "mlx5_0:1/100@0000:1a:00.0,mlx5_1:1/100@0000:1a:00.1,mlx5_2:1/100@0000:3b:00.0,"
                 "mlx5_3:1/200@0000:1a:00.2,mlx5_4:1/200@-");
  expect_devices(ENV("NCCL_IB_HCA=mlx5_1"), cards, "mlx5_1:1/100@0000:1a:00.1");
  expect_devices(
      ENV("NCCL_IB_HCA=^mlx5_0"), cards,
      "mlx5_1:1/100@0000:1a:00.1,mlx5_2:1/100@0000:3b:00.0,mlx5_3:1/200@0000:1a:00.2,mlx5_4:1/200@-");
  /* The ports list is the same either way. */
  expect_ports(NULL, cards, "mlx5_0:1:eth:g2,mlx5_1:1:eth:g2,mlx5_2:1:eth:g2,mlx5_3:1:ib:g0,mlx5_4:1:ib:g0");
  /* At most 4 members; a function's own ports stay apart (one port per function in a device). */
  expect_devices(NULL, "a@1a.0,b@1a.1,c@1a.2,d@1a.3,e@1a.4", "a+b+c+d/800@0000:1a:00.0,e:1/200@0000:1a:00.4");
  expect_devices(NULL, "mlx5_0@1a.0:ib:2,mlx5_1@1a.1:ib:2",
                 "mlx5_0+mlx5_1/400@0000:1a:00.0,mlx5_0:2+mlx5_1:2/400@0000:1a:00.0");
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
  test_merge();
  test_without_verbs();
  return test_finish("test_ib_devices");
}
