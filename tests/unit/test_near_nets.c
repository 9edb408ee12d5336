/* Which NICs each rank leaves through: the topology's nearest (graph/near_nets.c) on fixtures
 * with one NIC per GPU, two GPUs per pair of NICs, four GPUs on one NIC and host ranks on two
 * NUMA nodes; and the device each channel's connectors take (weft_net_near_dev). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "graph/topo.h"
#include "transport/net.h"

#define FIX "tests/data/topo/"
#define MAXR 8

static struct weft_topo_system* load(const char* name) {
  struct weft_topo_system* sys = NULL;
  char path[256];
  snprintf(path, sizeof(path), FIX "%s", name);
  EXPECT_MSG(weft_topo_load_file(path, &sys) == ncclSuccess, "loading %s", name);
  return sys;
}

/* near[] for GPUs with these bus ids, the devices named as a network would name them. */
static void near_of_gpus(struct weft_topo_system* sys, const char* const* bus, int n,
                         const char* const* names, int nnames, struct weft_topo_near_nets* out) {
  int64_t ids[MAXR];
  for (int i = 0; i < n; i++) ids[i] = weft_topo_busid_parse(bus[i]);
  EXPECT(weft_topo_near_nets(sys, 0, names, nnames, ids, n, out) == ncclSuccess);
}

/* One 400G NIC beside each GPU under its own PCIe switch: GPU i takes its own NIC alone, whatever
 * order the network lists them in; a name the topology lacks is near nobody. */
static void one_nic_per_gpu(void) {
  struct weft_topo_system* sys = load("h100-nvswitch-8gpu-8nic.xml");
  if (!sys) return;
  const char* bus[MAXR] = {"0000:19:00.0", "0000:39:00.0", "0000:59:00.0", "0000:79:00.0",
                           "0000:99:00.0", "0000:b9:00.0", "0000:d9:00.0", "0000:f9:00.0"};
  /* The network's order: reversed, with a device the file does not know first. */
  const char* names[9] = {"eth9",     "mlx5_7:1", "mlx5_6:1", "mlx5_5:1", "mlx5_4:1",
                          "mlx5_3:1", "mlx5_2:1", "mlx5_1:1", "mlx5_0:1"};
  struct weft_topo_near_nets near[MAXR];
  near_of_gpus(sys, bus, MAXR, names, 9, near);
  for (int g = 0; g < MAXR; g++) {
    EXPECT_EQ_INT(near[g].n, 1);
    EXPECT_EQ_INT(near[g].dev[0], 8 - g);
    EXPECT_EQ_INT(near[g].sharers, 1);
    EXPECT_EQ_INT(near[g].rail, 0);
  }
  /* The wrong port is another device. */
  const char* port2[1] = {"mlx5_0:2"};
  near_of_gpus(sys, bus, 1, port2, 1, near);
  EXPECT_EQ_INT(near[0].n, 0);
  /* A merged device (NCCL_IB_MERGE_NICS) is where its first member is, with or without ports. */
  const char* merged[3] = {"mlx5_7+mlx5_6", "mlx5_1:1+mlx5_2:1", "mlx5_0:2+mlx5_3:2"};
  near_of_gpus(sys, bus, MAXR, merged, 3, near);
  EXPECT_EQ_INT(near[7].n, 1);
  EXPECT_EQ_INT(near[7].dev[0], 0);
  EXPECT_EQ_INT(near[1].n, 1);
  EXPECT_EQ_INT(near[1].dev[0], 1);
  for (int g = 0; g < MAXR; g++) /* mlx5_0 has no port 2: that one is nowhere */
    for (int i = 0; i < near[g].n; i++) EXPECT(near[g].dev[i] != 2);
  weft_topo_system_destroy(sys);
}

/* Two GPUs and two NICs behind each PCIe switch: both GPUs see both NICs as near and take one
 * each (rails), the other switch's GPUs the other pair. */
static void two_gpus_two_nics(void) {
  struct weft_topo_system* sys = load("a100-nvswitch-8gpu-8nic.xml");
  if (!sys) return;
  const char* bus[3] = {"0000:11:00.0", "0000:12:00.0", "0000:51:00.0"};
  const char* names[4] = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"};
  struct weft_topo_near_nets near[3];
  near_of_gpus(sys, bus, 3, names, 4, near);
  for (int g = 0; g < 2; g++) {
    EXPECT_EQ_INT(near[g].n, 2);
    EXPECT_EQ_INT(near[g].dev[0], 0);
    EXPECT_EQ_INT(near[g].dev[1], 1);
    EXPECT_EQ_INT(near[g].sharers, 2);
    EXPECT_EQ_INT(near[g].rail, g);
  }
  EXPECT_EQ_INT(near[2].n, 2);
  EXPECT_EQ_INT(near[2].dev[0], 2);
  EXPECT_EQ_INT(near[2].rail, 0);
  struct weft_net_near a = {.n = near[0].n,
                            .dev = {near[0].dev[0], near[0].dev[1]},
                            .rail = near[0].rail,
                            .sharers = near[0].sharers};
  struct weft_net_near b = {.n = near[1].n,
                            .dev = {near[1].dev[0], near[1].dev[1]},
                            .rail = near[1].rail,
                            .sharers = near[1].sharers};
  for (int c = 0; c < 4; c++) {
    EXPECT_EQ_INT(weft_net_near_dev(&a, 4, c), 0);
    EXPECT_EQ_INT(weft_net_near_dev(&b, 4, c), 1);
  }
  weft_topo_system_destroy(sys);
}

/* Four GPUs behind one switch with one NIC: all four share it. */
static void four_gpus_one_nic(void) {
  struct weft_topo_system* sys = load("pcie-4gpu-1switch.xml");
  if (!sys) return;
  const char* bus[4] = {"0000:41:00.0", "0000:42:00.0", "0000:43:00.0", "0000:44:00.0"};
  const char* names[1] = {"mlx5_0:1"};
  struct weft_topo_near_nets near[4];
  near_of_gpus(sys, bus, 4, names, 1, near);
  for (int g = 0; g < 4; g++) {
    EXPECT_EQ_INT(near[g].n, 1);
    EXPECT_EQ_INT(near[g].sharers, 4);
    EXPECT_EQ_INT(near[g].rail, g);
  }
  weft_topo_system_destroy(sys);
}

/* Host ranks on two NUMA nodes, a 200G NIC under socket 0 and a 25G one under socket 1: NCCL's
 * rule puts bandwidth before distance, so both ranks take the 200G NIC (socket 1's rank across
 * the inter-socket link, still faster than its own 25G NIC). */
static void host_ranks_two_numa(void) {
  struct weft_topo_system* sys = load("cpu-2numa-2nic.xml");
  if (!sys) return;
  int numa[2] = {0, 1};
  EXPECT(weft_topo_add_host_ranks(sys, 0, 2, numa, 10.0f) == ncclSuccess);
  const char* names[2] = {"eth0", "mlx5_0:1"};
  struct weft_topo_near_nets near[2];
  EXPECT(weft_topo_near_nets(sys, 0, names, 2, NULL, 2, near) == ncclSuccess);
  for (int r = 0; r < 2; r++) {
    EXPECT_EQ_INT(near[r].n, 1);
    EXPECT_EQ_INT(near[r].dev[0], 1);
    EXPECT_EQ_INT(near[r].sharers, 2);
    EXPECT_EQ_INT(near[r].rail, r);
  }
  /* Without the 200G NIC each rank's nearest is the one NIC left. */
  EXPECT(weft_topo_near_nets(sys, 0, names, 1, NULL, 2, near) == ncclSuccess);
  EXPECT_EQ_INT(near[0].n, 1);
  EXPECT_EQ_INT(near[1].dev[0], 0);
  weft_topo_system_destroy(sys);
}

/* The device per channel: ranks take turns over their near devices, channels spread over a
 * rank's share; without the topology (n == 0) every device of the network is near. */
static void device_per_channel(void) {
  struct weft_net_near alone = {
      .n = 0, .dev = {0}, .rail = 0, .sharers = 1}; /* one rank on its host, 2 devices */
  for (int c = 0; c < 4; c++) EXPECT_EQ_INT(weft_net_near_dev(&alone, 2, c), c % 2);
  struct weft_net_near r0 = {.n = 0, .dev = {0}, .rail = 0, .sharers = 2},
                       r1 = {.n = 0, .dev = {0}, .rail = 1, .sharers = 2}; /* two ranks, 2 devices */
  for (int c = 0; c < 4; c++) {
    EXPECT_EQ_INT(weft_net_near_dev(&r0, 2, c), 0);
    EXPECT_EQ_INT(weft_net_near_dev(&r1, 2, c), 1);
  }
  struct weft_net_near q0 = {.n = 0, .dev = {0}, .rail = 0, .sharers = 2},
                       q1 = {.n = 0, .dev = {0}, .rail = 1, .sharers = 2}; /* two ranks, 4 devices: 2 each */
  int used[4] = {0};
  for (int c = 0; c < 4; c++) {
    used[weft_net_near_dev(&q0, 4, c)] |= 1;
    used[weft_net_near_dev(&q1, 4, c)] |= 2;
  }
  EXPECT(used[0] == 1 && used[1] == 1 && used[2] == 2 && used[3] == 2);
  struct weft_net_near eight = {
      .n = 0, .dev = {0}, .rail = 5, .sharers = 8}; /* 8 ranks on 2 devices: alternate */
  EXPECT_EQ_INT(weft_net_near_dev(&eight, 2, 3), 1);
  struct weft_net_near listed = {
      .n = 2, .dev = {3, 1}, .rail = 0, .sharers = 1}; /* the topology's two, of 4 */
  EXPECT_EQ_INT(weft_net_near_dev(&listed, 4, 0), 3);
  EXPECT_EQ_INT(weft_net_near_dev(&listed, 4, 1), 1);
  EXPECT_EQ_INT(weft_net_near_dev(NULL, 4, 3), 0);
  struct weft_net_near gone = {
      .n = 1, .dev = {5}, .rail = 0, .sharers = 1}; /* a device the network no longer has */
  EXPECT_EQ_INT(weft_net_near_dev(&gone, 4, 0), 0);
}

/* GPUDirect RDMA by the topology: a GPU and its NIC behind one switch may (within the default
 * PXB), not with NCCL_NET_GDR_LEVEL=LOC, nor host ranks; the connector's device decides. */
static void gdr_by_topology(void) {
  const char* bus[2] = {"0000:19:00.0", "0000:39:00.0"};
  const char* names[2] = {"mlx5_0:1", "mlx5_1:1"};
  struct weft_topo_near_nets near[2];
  struct weft_topo_system* sys = load("h100-nvswitch-8gpu-8nic.xml");
  if (!sys) return;
  near_of_gpus(sys, bus, 2, names, 2, near);
  EXPECT_EQ_INT((int)near[0].gdr, 1);
  EXPECT_EQ_INT((int)near[1].gdr, 1);
  weft_topo_system_destroy(sys);
  setenv("NCCL_NET_GDR_LEVEL", "LOC", 1);
  if ((sys = load("h100-nvswitch-8gpu-8nic.xml")) != NULL) {
    near_of_gpus(sys, bus, 2, names, 2, near);
    EXPECT_EQ_INT((int)near[0].gdr, 0);
    weft_topo_system_destroy(sys);
  }
  unsetenv("NCCL_NET_GDR_LEVEL");
  if ((sys = load("cpu-2numa-2nic.xml")) != NULL) { /* host ranks never */
    int numa[1] = {0};
    const char* nic[1] = {"mlx5_0:1"};
    EXPECT(weft_topo_add_host_ranks(sys, 0, 1, numa, 10.0f) == ncclSuccess);
    EXPECT(weft_topo_near_nets(sys, 0, nic, 1, NULL, 1, near) == ncclSuccess);
    EXPECT_EQ_INT(near[0].n, 1);
    EXPECT_EQ_INT((int)near[0].gdr, 0);
    weft_topo_system_destroy(sys);
  }
  struct weft_net_near two = {.n = 2, .dev = {3, 1}, .sharers = 1, .gdr = 2};
  EXPECT_EQ_INT(weft_net_near_gdr(&two, 1), 1);
  EXPECT_EQ_INT(weft_net_near_gdr(&two, 3), 0);
  EXPECT_EQ_INT(weft_net_near_gdr(&two, 0), 0);
  struct weft_net_near unplaced = {.sharers = 1, .gdr_unplaced = 1};
  EXPECT_EQ_INT(weft_net_near_gdr(&unplaced, 2), 1);
  EXPECT_EQ_INT(weft_net_near_gdr(NULL, 0), 0);
}

int main(void) {
  gdr_by_topology();
  one_nic_per_gpu();
  two_gpus_two_nics();
  four_gpus_one_nic();
  host_ranks_two_numa();
  device_per_channel();
  return test_finish("test_near_nets");
}
