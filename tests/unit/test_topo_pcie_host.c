/* GPUs without PCIe peer-to-peer (GeForce board ids, or <gpu p2p="0">) move data through host
 * memory: every ring hop goes up to the sender's CPU, is written to and read from its memory,
 * and comes down to the receiver (across the socket link when they sit on different sockets);
 * the PCIe uplinks and the memory are shared by all channels. The search must find the
 * bandwidth those shared resources leave, not the peer-to-peer figure. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "graph/topo.h"

static char* read_all(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) return NULL;
  char* buf = calloc(1, 1 << 16);
  size_t n = buf ? fread(buf, 1, (1 << 16) - 1, f) : 0;
  fclose(f);
  if (buf) buf[n] = 0;
  return buf;
}

/* The fixture with every occurrence of `from` replaced by `to` (same length or shorter). */
static struct weft_topo_system* load_edited(const char* file, const char* from, const char* to) {
  char path[256];
  snprintf(path, sizeof(path), "tests/data/topo/%s", file);
  char* text = read_all(path);
  EXPECT_MSG(text != NULL, "reading %s", path);
  if (text == NULL) return NULL;
  char* out = calloc(1, strlen(text) * 2 + 1);
  size_t n = 0;
  for (const char* p = text; *p;) {
    if (from && strncmp(p, from, strlen(from)) == 0) {
      memcpy(out + n, to, strlen(to));
      n += strlen(to);
      p += strlen(from);
    } else {
      out[n++] = *p++;
    }
  }
  struct weft_topo_system* sys = NULL;
  EXPECT(weft_topo_load_text(out, n, file, &sys) == ncclSuccess);
  free(text);
  free(out);
  return sys;
}

static void ring_nodes(struct weft_topo_system* sys, int nnodes, int* nch, float* bw, int* type) {
  struct weft_topo_graph* g = calloc(1, sizeof(*g));
  EXPECT(weft_topo_search(sys, 0, nnodes, WEFT_PATTERN_RING, g) == ncclSuccess);
  *nch = g->nchannels;
  *bw = g->bw_intra;
  *type = g->type_intra;
  weft_topo_graph_fini(g);
  free(g);
}

static void ring_of(struct weft_topo_system* sys, int* nch, float* bw, int* type) {
  ring_nodes(sys, 1, nch, bw, type);
}

static int near(float a, float b) { return fabsf(a - b) < 0.01f; }

/* 8 GPUs, 4 per PCIe switch, one switch per Ice Lake socket. */
static void check_two_sockets(void) {
  const char* file = "pcie-8gpu-2switch-2socket.xml";
  int nch, type;
  float bw;
  struct weft_topo_system* p2p = load_edited(file, NULL, NULL);
  struct weft_topo_system* geforce =
      load_edited(file, "device=\"0x2230\"", "device=\"0x2204\""); /* RTX 3090 */
  if (p2p == NULL || geforce == NULL) return;
  ring_of(p2p, &nch, &bw, &type);
  EXPECT_MSG(nch == 1 && near(bw, 10), "P2P boards: %d x %.2f, expected 1 x 10 (socket link)", nch, bw);
  EXPECT(weft_topo_compute_paths(geforce) == ncclSuccess);
  /* Same switch, but no P2P: through the CPU, and the path ends in the CPU's memory. */
  struct weft_topo_node* g0 = weft_topo_rank_node(geforce, 0, 0);
  struct weft_topo_path* p01 =
      g0 ? &g0->paths[WEFT_NODE_GPU][weft_topo_rank_node(geforce, 0, 1)->index] : NULL;
  EXPECT(p01 && p01->type == WEFT_PATH_PHB && p01->nhops == 5);
  EXPECT(p01 && p01->hops[p01->nhops - 1] == &geforce->nodes[WEFT_NODE_CPU][g0->cpu].mem);
  EXPECT_EQ_INT(weft_topo_rank_path(geforce, 0, 0, 4, NULL), WEFT_PATH_SYS);
  /* Each switch uplink carries 4 hops a channel (24 / 4 = 6), the downlink 3 hops staged on its
   * own Intel socket (charged 1.2x) and one from the other socket: 6 x 4.6 > 24, 5 x 4.6 fits. */
  ring_of(geforce, &nch, &bw, &type);
  EXPECT_MSG(nch == 1 && near(bw, 5) && type == WEFT_PATH_SYS,
             "GeForce: %d x %.2f type %d, expected 1 x 5 SYS", nch, bw, type);
  /* NCCL_P2P_LEVEL cannot give boards P2P they do not have. */
  setenv("NCCL_P2P_LEVEL", "SYS", 1);
  ring_of(geforce, &nch, &bw, &type);
  unsetenv("NCCL_P2P_LEVEL");
  EXPECT_MSG(nch == 1 && near(bw, 5), "GeForce, P2P_LEVEL=SYS: %d x %.2f, expected 1 x 5", nch, bw);
  /* Two nodes: the ring enters and leaves through the socket-1 NIC; the 5 GB/s channel stays one
   * channel, not 21 of 0.24 GB/s that add up to a little more (NCCL stops under half the speed). */
  ring_nodes(geforce, 2, &nch, &bw, &type);
  EXPECT_MSG(nch == 1 && near(bw, 5), "GeForce, 2 nodes: %d x %.2f, expected 1 x 5", nch, bw);
  weft_topo_system_destroy(geforce);
  /* The memory is shared: 4 staged hops a channel on each socket. 32 GB/s of memory is 16 of
   * staged traffic (each byte written then read): 4 GB/s a hop. */
  setenv("WEFT_TOPO_HOST_MEM_BW", "32", 1);
  geforce = load_edited(file, "device=\"0x2230\"", "device=\"0x2204\"");
  unsetenv("WEFT_TOPO_HOST_MEM_BW");
  if (geforce) {
    ring_of(geforce, &nch, &bw, &type);
    EXPECT_MSG(nch == 1 && near(bw, 4), "GeForce, 32 GB/s memory: %d x %.2f, expected 1 x 4", nch, bw);
  }
  weft_topo_system_destroy(geforce);
  weft_topo_system_destroy(p2p);
}

/* 4 GPUs behind one switch on an AMD socket, marked p2p="0" in the file. */
static void check_attribute(void) {
  const char* file = "pcie-4gpu-1switch.xml";
  int nch, type;
  float bw;
  struct weft_topo_system* sys = load_edited(file, "<gpu ", "<gpu p2p=\"0\" ");
  if (sys == NULL) return;
  /* The uplink carries all 4 hops of a channel each way: 24 / 4 = 6 in total, whatever the split;
   * with P2P the same switch gives 2 x 12. */
  ring_of(sys, &nch, &bw, &type);
  EXPECT_MSG(near(nch * bw, 6) && type == WEFT_PATH_PHB,
             "p2p=0: %d x %.2f type %d, expected 6 GB/s in all, PHB", nch, bw, type);
  weft_topo_system_destroy(sys);
  /* and the board id alone (RTX 4090) says the same */
  sys = load_edited(file, "device=\"0x26b1\"", "device=\"0x2684\"");
  if (sys) ring_of(sys, &nch, &bw, &type);
  EXPECT_MSG(sys && near(nch * bw, 6), "RTX 4090: %d x %.2f", nch, bw);
  weft_topo_system_destroy(sys);
}

/* The P2P verdict the CUDA backend's transport asks for (weft_topo_p2p_between, by bus id): the
 * path between the GPUs against NCCL_P2P_LEVEL (default PXB), never for boards without P2P. */
static void check_verdicts(void) {
  const char* file = "pcie-8gpu-2switch-2socket.xml";
  int64_t g0 = weft_topo_busid_parse("0000:20:00.0"), g1 = weft_topo_busid_parse("0000:21:00.0");
  int64_t g4 = weft_topo_busid_parse("0000:a0:00.0"), none = weft_topo_busid_parse("0000:77:00.0");
  struct weft_topo_system* sys = load_edited(file, NULL, NULL);
  if (sys == NULL) return;
  EXPECT_EQ_INT(weft_topo_p2p_between(sys, 0, g0, g1), 1); /* one switch */
  EXPECT_EQ_INT(weft_topo_p2p_between(sys, 0, g1, g0), 1);
  EXPECT_EQ_INT(weft_topo_p2p_between(sys, 0, g0, g4), 0); /* across the sockets */
  EXPECT_EQ_INT(weft_topo_p2p_between(sys, 0, g4, g0), 0);
  EXPECT_EQ_INT(weft_topo_p2p_between(sys, 0, g0, none), -1); /* not in the model */
  EXPECT_EQ_INT(weft_topo_p2p_between(sys, 0, g0, g0), -1);
  EXPECT_EQ_INT(weft_topo_p2p_between(sys, 1, g0, g1), -1); /* no such host */
  static const struct {
    const char* name;
    const char* value;
    int same_switch, across;
  } env[] = {{"NCCL_P2P_LEVEL", "SYS", 1, 1}, {"NCCL_P2P_LEVEL", "PHB", 1, 0},
             {"NCCL_P2P_LEVEL", "LOC", 0, 0}, {"NCCL_P2P_LEVEL", "4", 1, 1},
             {"NCCL_P2P_LEVEL", "1", 1, 0},   {"NCCL_P2P_DISABLE", "1", 0, 0}};
  for (size_t i = 0; i < sizeof(env) / sizeof(env[0]); i++) {
    setenv(env[i].name, env[i].value, 1);
    EXPECT(weft_topo_compute_paths(sys) == ncclSuccess);
    int a = weft_topo_p2p_between(sys, 0, g0, g1), b = weft_topo_p2p_between(sys, 0, g0, g4);
    EXPECT_MSG(a == env[i].same_switch && b == env[i].across, "%s=%s: %d %d, expected %d %d", env[i].name,
               env[i].value, a, b, env[i].same_switch, env[i].across);
    unsetenv(env[i].name);
  }
  weft_topo_system_destroy(sys);
  sys = load_edited(file, "device=\"0x2230\"", "device=\"0x2204\""); /* RTX 3090: no P2P */
  setenv("NCCL_P2P_LEVEL", "SYS", 1);
  EXPECT(sys && weft_topo_p2p_between(sys, 0, g0, g1) == 0);
  unsetenv("NCCL_P2P_LEVEL");
  weft_topo_system_destroy(sys);
}

int main(void) {
  setenv("NCCL_DEBUG", "WARN", 0);
  check_two_sockets();
  check_attribute();
  check_verdicts();
  return test_finish("test_topo_pcie_host");
}
