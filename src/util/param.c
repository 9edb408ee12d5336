/* The one table of environment variables, and their lookup: environment first, then the
 * config file (NCCL_CONF_FILE or ~/.nccl.conf, then /etc/nccl.conf), then the default. */
#include "util/param.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

static const struct weft_param_def params[] = {
    /* Logging */
    {"NCCL_DEBUG", WEFT_PARAM_STR, NULL, "Log level: VERSION, WARN, INFO, ABORT or TRACE"},
    {"NCCL_DEBUG_SUBSYS", WEFT_PARAM_STR, "INIT,BOOTSTRAP,ENV",
     "Subsystems logged at INFO: comma list of INIT,COLL,P2P,SHM,NET,GRAPH,TUNING,ENV,ALLOC,CALL,PROXY,"
     "NVLS,BOOTSTRAP,REG,PROFILE,RAS,ALL; a leading ^ excludes"},
    {"NCCL_DEBUG_FILE", WEFT_PARAM_STR, NULL, "Write the log to this file (%h host name, %p pid)"},
    {"NCCL_DEBUG_TIMESTAMP_LEVELS", WEFT_PARAM_STR, "WARN", "Levels whose lines carry a timestamp"},
    {"NCCL_DEBUG_TIMESTAMP_FORMAT", WEFT_PARAM_STR, "[%F %T] ", "strftime format of log timestamps"},
    {"NCCL_CONF_FILE", WEFT_PARAM_STR, NULL, "Config file read instead of ~/.nccl.conf (VAR=value lines)"},
    /* Bootstrap and sockets */
    {"NCCL_COMM_ID", WEFT_PARAM_STR, NULL, "host:port of the bootstrap root; rank 0 hosts it"},
    {"WEFT_JOB_SECRET", WEFT_PARAM_STR, NULL,
     "Secret every rank of an NCCL_COMM_ID job shares; the bootstrap derives its key from it"},
    {"NCCL_SOCKET_IFNAME", WEFT_PARAM_STR, NULL,
     "Interfaces for sockets: prefix list, ^ excludes, = exact match"},
    {"NCCL_SOCKET_FAMILY", WEFT_PARAM_STR, NULL, "AF_INET or AF_INET6 to force an address family"},
    {"NCCL_SOCKET_RETRY_CNT", WEFT_PARAM_INT, "34", "Connection attempts refused before giving up"},
    {"NCCL_SOCKET_RETRY_SLEEP_MSEC", WEFT_PARAM_INT, "100", "Pause between refused connection attempts"},
    {"NCCL_HOSTID", WEFT_PARAM_STR, NULL, "Host identity used instead of host name + boot id"},
    {"WEFT_HOSTID", WEFT_PARAM_STR, NULL, "Host identity (overrides NCCL_HOSTID); lets tests act as hosts"},
    {"WEFT_BOOTSTRAP_TIMEOUT", WEFT_PARAM_INT, "300",
     "Seconds a bootstrap step waits before failing (0: no limit)"},
    {"WEFT_PSK_FILE", WEFT_PARAM_STR, NULL,
     "File holding a pre-shared key: as ncclSetEncryption(PSK) for programs that do not call it"},
    {"NCCL_UID_STAGGER_THRESHOLD", WEFT_PARAM_INT, "256", "Ranks per root above which check-ins stagger"},
    {"NCCL_UID_STAGGER_RATE", WEFT_PARAM_INT, "7000", "Check-ins per second when staggering"},
    {"WEFT_BOOTSTRAP_LOG_GATHER_MIN", WEFT_PARAM_INT, "32",
     "Ranks from which bootstrap all-gathers take log2(n) rounds instead of the ring (0: always the ring)"},
    {"WEFT_BOOTSTRAP_MAX_CONNS", WEFT_PARAM_INT, "64",
     "Connections a rank keeps open to send further bootstrap messages to other processes' ranks, least "
     "recently used closed first (0: one connection a message)"},
    {"WEFT_BOOTSTRAP_PROBE_MS", WEFT_PARAM_INT, "1000",
     "Milliseconds a bootstrap receive waits before it checks that the sender still listens (then "
     "every 2x as long, up to 8x; 0: never)"},
    /* Backend, waits and errors */
    {"WEFT_BACKEND", WEFT_PARAM_STR, "auto", "auto, cuda or host: where collectives run"},
    {"WEFT_TIMEOUT", WEFT_PARAM_INT, "1800", "Seconds a collective waits for a peer before failing"},
    {"WEFT_WARN_AFTER", WEFT_PARAM_INT, "60", "Seconds of waiting after which one WARN names the peer"},
    {"WEFT_SPIN_USEC", WEFT_PARAM_INT, "50", "Microseconds a host wait spins before it sleeps"},
    {"WEFT_SPIN_BUSY_USEC", WEFT_PARAM_INT, "20000",
     "Host backend: microseconds a wait on shared boards spins before it sleeps while its peers answered "
     "the last wait without sleeping (ranks that fit the CPUs; 0: WEFT_SPIN_USEC always)"},
    {"WEFT_NET_INTERLEAVE", WEFT_PARAM_INT, "1",
     "Host backend: 0 runs network ring channels one after another"},
    {"WEFT_NET_CHUNKSIZE", WEFT_PARAM_INT, NULL,
     "Host backend: most bytes per ring step across hosts (64 KiB x hosts)"},
    {"WEFT_NET_SEND_BY_REF", WEFT_PARAM_INT, "1",
     "Host backend: 0 copies ring steps for the network into the FIFO"},
    {"WEFT_DIRECT", WEFT_PARAM_INT, "1",
     "Host backend: 0 disables the shared-board paths (small exchange, zero-copy)"},
    {"WEFT_TRACE_BUFFER", WEFT_PARAM_INT, "2048",
     "Flight recorder: operations each communicator remembers (0 turns the recorder off)"},
    {"WEFT_TRACE_DIR", WEFT_PARAM_STR, NULL,
     "Flight recorder: directory for one JSON dump per rank on a failed operation, ncclCommAbort, SIGUSR1 or "
     "a fatal signal (read them with weft-trace DIR); unset: dumps only on weftCommDumpTrace"},
    {"WEFT_TRACE_SIGNALS", WEFT_PARAM_INT, "1",
     "Flight recorder: 0 installs no SIGUSR1 or fatal-signal handler even when WEFT_TRACE_DIR is set"},
    {"NCCL_PROFILER_PLUGIN", WEFT_PARAM_STR, NULL,
     "Profiler plugin: a name (libnccl-profiler-NAME.so), a file name or path, or none; unset: "
     "libnccl-profiler.so if the loader finds it"},
    {"WEFT_DETERMINISTIC", WEFT_PARAM_INT, "0",
     "1: reductions give bitwise identical results from run to run, whatever the channel count, protocol, "
     "algorithm or timing (AllReduce runs as Reduce to the last rank then Broadcast, every channel on the "
     "rank-order ring); ranks must agree"},
    {"WEFT_CHECK_CALLS", WEFT_PARAM_INT, "1",
     "Host backend: 0 stops comparing each collective's fingerprint (collective, count, datatype, op, "
     "root) across ranks on the shared boards; for measuring its cost only"},
    {"NCCL_COMM_BLOCKING", WEFT_PARAM_INT, NULL, "Overrides ncclConfig_t.blocking"},
    {"NCCL_CGA_CLUSTER_SIZE", WEFT_PARAM_INT, NULL, "Overrides ncclConfig_t.cgaClusterSize"},
    {"NCCL_MIN_CTAS", WEFT_PARAM_INT, NULL, "Overrides ncclConfig_t.minCTAs"},
    {"NCCL_MAX_CTAS", WEFT_PARAM_INT, NULL, "Overrides ncclConfig_t.maxCTAs"},
    {"NCCL_NET", WEFT_PARAM_STR, NULL,
     "Network to use, by name, among the loaded plugins and the built-ins (IB, Socket); unset: the first "
     "usable, "
     "plugins first (overrides ncclConfig_t.netName)"},
    {"NCCL_NET_PLUGIN", WEFT_PARAM_STR, NULL,
     "Net plugins to load: a comma-separated list of names (x: libnccl-net-x.so) or .so files; none: no "
     "plugin; unset: libnccl-net.so when it exists"},
    {"NCCL_COMM_SPLIT_SHARE_RESOURCES", WEFT_PARAM_INT, NULL, "Overrides ncclConfig_t.splitShare"},
    {"NCCL_CTA_POLICY", WEFT_PARAM_INT, NULL, "Overrides ncclConfig_t.CTAPolicy"},
    /* Algorithms, protocols, channels */
    {"NCCL_ALGO", WEFT_PARAM_STR, NULL, "Algorithms allowed (Ring, Tree, ...; ^ excludes)"},
    {"NCCL_PROTO", WEFT_PARAM_STR, NULL, "Protocols allowed (LL, LL128, Simple; ^ excludes)"},
    {"NCCL_MIN_NCHANNELS", WEFT_PARAM_INT, NULL, "Fewest channels a collective uses"},
    {"NCCL_MAX_NCHANNELS", WEFT_PARAM_INT, NULL, "Most channels a collective uses"},
    {"NCCL_TUNER_PLUGIN", WEFT_PARAM_STR, NULL,
     "Tuner plugin: a name (libnccl-tuner-NAME.so) or a library file/path; none disables; unset tries "
     "libnccl-tuner.so, then the net plugin's library"},
    {"NCCL_BUFFSIZE", WEFT_PARAM_INT, "4194304", "Bytes of each Simple-protocol connector FIFO"},
    {"NCCL_LL_BUFFSIZE", WEFT_PARAM_INT, NULL, "Bytes of each LL-protocol connector FIFO"},
    {"NCCL_NTHREADS", WEFT_PARAM_INT, "512", "Threads per block of the CUDA kernels"},
    {"WEFT_CUDA_STEP_BASE", WEFT_PARAM_INT, "0",
     "Tests: step every CUDA connector starts at (same on all ranks), e.g. near 2^32 for the LL flag wrap"},
    {"NCCL_P2P_LL_THRESHOLD", WEFT_PARAM_INT, "16384", "Send/recv bytes per channel below which LL is used"},
    {"NCCL_MIN_P2P_NCHANNELS", WEFT_PARAM_INT, "1", "Fewest channels for send/recv"},
    {"NCCL_MAX_P2P_NCHANNELS", WEFT_PARAM_INT, "64", "Most channels for send/recv"},
    /* Topology and transports */
    {"NCCL_TOPO_FILE", WEFT_PARAM_STR, NULL, "Topology XML read instead of detecting the machine"},
    {"NCCL_TOPO_DUMP_FILE", WEFT_PARAM_STR, NULL, "Write the detected topology XML here"},
    {"NCCL_GRAPH_FILE", WEFT_PARAM_STR, NULL, "Graph XML (rings, trees) read instead of searching"},
    {"NCCL_GRAPH_DUMP_FILE", WEFT_PARAM_STR, NULL, "Write the searched graphs here"},
    {"NCCL_P2P_DISABLE", WEFT_PARAM_INT, "0", "Disable the peer-to-peer transport"},
    {"NCCL_P2P_LEVEL", WEFT_PARAM_STR, NULL, "Farthest path type (LOC,NVL,PIX,PXB,PHB,SYS) for P2P"},
    {"NCCL_SHM_DISABLE", WEFT_PARAM_INT, "0", "Disable the shared-memory transport"},
    {"NCCL_NET_GDR_LEVEL", WEFT_PARAM_STR, NULL,
     "Farthest GPU-NIC path type for GPUDirect RDMA (default PXB): FIFOs in GPU memory"},
    {"NCCL_NET_GDR_READ", WEFT_PARAM_INT, "-2",
     "Sending FIFOs in GPU memory, the NIC reading them (1 on, 0 off, -2 auto: from Ampere on)"},
    {"NCCL_DMABUF_ENABLE", WEFT_PARAM_INT, "1", "GPU memory registered with the NIC through DMA-BUF"},
    {"NCCL_NET_FORCE_FLUSH", WEFT_PARAM_INT, "0",
     "1: flush a NIC's writes to GPU memory before each Simple step even on GPUs that order them"},
    {"NCCL_CROSS_NIC", WEFT_PARAM_INT, "2",
     "Rings may enter and leave a node on different NICs (0,1,2=auto)"},
    {"NCCL_NVB_DISABLE", WEFT_PARAM_INT, "0",
     "Do not route GPU traffic through an NVLink-connected peer GPU"},
    {"NCCL_PXN_DISABLE", WEFT_PARAM_INT, "0",
     "Do not send to a NIC through an NVLink peer GPU closer to it (PXN)"},
    {"WEFT_HOST_COPY_BW", WEFT_PARAM_STR, NULL,
     "Host backend: memory copy bandwidth (GB/s) the tuning model assumes instead of measuring it; tests set "
     "absurd values to make the model wrong on purpose"},
    {"WEFT_TOPO_SYSFS", WEFT_PARAM_STR, "",
     "Prefix of /sys and /proc for topology detection (tests use a fake tree)"},
    {"WEFT_TOPO_HOST_MEM_BW", WEFT_PARAM_INT, NULL,
     "GB/s a NUMA node's memory gives GPU/NIC traffic staged there (default: estimate by CPU)"},
    {"WEFT_TOPO_DETECT", WEFT_PARAM_STR, "auto",
     "Topology detection: auto (hwloc when it loads, else sysfs), hwloc, or sysfs"},
    {"NCCL_IB_DISABLE", WEFT_PARAM_INT, "0", "1: do not look for InfiniBand / RoCE devices"},
    {"NCCL_IB_HCA", WEFT_PARAM_STR, NULL,
     "InfiniBand devices to use: prefixes, =exact, ^excluded, name:port (default: all)"},
    {"NCCL_IB_MERGE_NICS", WEFT_PARAM_INT, "1",
     "1: the ports of one card's PCI functions (same PCI path but the function, same link layer) are one IB "
     "device, up to 4; 0: each port is a device"},
    {"NCCL_IB_GID_INDEX", WEFT_PARAM_INT, "-1", "RoCE GID index (-1: chosen by family, range and version)"},
    {"NCCL_IB_ROCE_VERSION_NUM", WEFT_PARAM_INT, "2", "RoCE version the chosen GID should have"},
    {"NCCL_IB_ADDR_FAMILY", WEFT_PARAM_STR, "AF_INET", "Address family of the chosen RoCE GID"},
    {"NCCL_IB_ADDR_RANGE", WEFT_PARAM_STR, NULL, "Subnet (addr/bits) the chosen RoCE GID must be in"},
    {"NCCL_IB_TIMEOUT", WEFT_PARAM_INT, "20", "IB queue pairs' ACK timeout (4.096 us x 2^value)"},
    {"NCCL_IB_RETRY_CNT", WEFT_PARAM_INT, "7", "IB queue pairs' retries before a transfer fails"},
    {"NCCL_IB_SL", WEFT_PARAM_INT, "-1", "IB service level (-1: 0)"},
    {"NCCL_IB_TC", WEFT_PARAM_INT, "-1", "IB traffic class (-1: 0)"},
    {"NCCL_IB_QPS_PER_CONNECTION", WEFT_PARAM_INT, "1",
     "Queue pairs per IB connection, per member of a merged device (at most 4 in all; the receiver's "
     "counts)"},
    {"NCCL_IB_SPLIT_DATA_ON_QPS", WEFT_PARAM_INT, "0",
     "1: each IB message is split over all its connection's queue pairs; 0: messages take turns"},
    {"NCCL_IB_PCI_RELAXED_ORDERING", WEFT_PARAM_INT, "2",
     "IB data buffers registered for PCIe relaxed ordering: 0 no, 1 or 2 where libibverbs supports it"},
    {"NCCL_IB_ADAPTIVE_ROUTING", WEFT_PARAM_INT, "-2",
     "1: large IB messages go as plain RDMA writes then an empty write with immediate (-2: on InfiniBand, "
     "not RoCE)"},
    {"NCCL_IB_AR_THRESHOLD", WEFT_PARAM_INT, "8192",
     "Bytes from which adaptive routing's write pattern is used"},
    {"WEFT_IBVERBS_LIB", WEFT_PARAM_STR, "libibverbs.so.1",
     "verbs library to dlopen (tests name their own verbs provider)"},
    {"WEFT_HWLOC_LIB", WEFT_PARAM_STR, "libhwloc.so.15",
     "hwloc library to dlopen (tests name a missing one to check the sysfs fallback)"},
    {"WEFT_HWLOC_XML", WEFT_PARAM_STR, NULL,
     "hwloc XML file (lstopo --of xml) detected instead of this machine"},
    {"NCCL_SOCKET_NTHREADS", WEFT_PARAM_INT, NULL, "Helper threads per socket connection"},
    {"NCCL_NSOCKS_PERTHREAD", WEFT_PARAM_INT, NULL, "Sockets per helper thread"},
    {"NCCL_IGNORE_CPU_AFFINITY", WEFT_PARAM_INT, "0",
     "1: weftrun --bind numa pins a GPU rank near its GPU even outside the job's CPU affinity"},
    {"NCCL_CUMEM_ENABLE", WEFT_PARAM_INT, NULL, "Use the cuMem API for device buffers"},
    {"NCCL_LAUNCH_MODE", WEFT_PARAM_STR, "PARALLEL", "PARALLEL or GROUP launch of grouped kernels"},
    {"WEFT_SHM_DIR", WEFT_PARAM_STR, "/dev/shm", "Directory whose free space shared memory uses"},
    {"WEFT_CUDA_ARCH", WEFT_PARAM_STR, NULL,
     "Informational: GPU architectures the CUDA backend was built for"},
    /* weft-doctor and the checks init shares with it */
    {"WEFT_DOCTOR_ROOT", WEFT_PARAM_STR, "",
     "Prefix of the /proc and /sys files weft-doctor's checks read (tests plant findings in a fake tree)"},
    {"WEFT_ENV_CHECK", WEFT_PARAM_INT, "1",
     "1: init WARNs once about NCCL_*/WEFT_* variables that look misspelt (close to a known name); 0: "
     "silent"},
};

#define NPARAMS ((int)(sizeof(params) / sizeof(params[0])))

/* Values read from config files, kept apart from the environment so sources stay visible. */
struct file_entry {
  char* name;
  char* value;
  struct file_entry* next;
};

static pthread_mutex_t file_lock = PTHREAD_MUTEX_INITIALIZER;
static struct file_entry* file_entries;
static int files_loaded;

static void trim(char** start) {
  char* s = *start;
  while (*s == ' ' || *s == '\t') s++;
  char* end = s + strlen(s);
  while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r' || end[-1] == '\n')) *--end = 0;
  *start = s;
}

static int parse_line(char* line) {
  trim(&line);
  if (line[0] == 0 || line[0] == '#') return 0;
  char* eq = strchr(line, '=');
  if (eq == NULL || eq == line) return 0;
  *eq = 0;
  char* name = line;
  char* value = eq + 1;
  trim(&name);
  trim(&value);
  /* The first file read wins, as NCCL's setenv without overwrite does. */
  for (struct file_entry* e = file_entries; e; e = e->next)
    if (strcmp(e->name, name) == 0) return 0;
  struct file_entry* e = calloc(1, sizeof(*e));
  if (e == NULL) return 0;
  e->name = strdup(name);
  e->value = strdup(value);
  e->next = file_entries;
  file_entries = e;
  return 1;
}

static int load_text_locked(const char* text) {
  int n = 0;
  char* copy = strdup(text);
  if (copy == NULL) return 0;
  char* save = NULL;
  for (char* line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
    n += parse_line(line);
  free(copy);
  return n;
}

int weft_param_load_text(const char* text) {
  pthread_mutex_lock(&file_lock);
  files_loaded = 1;
  int n = load_text_locked(text);
  pthread_mutex_unlock(&file_lock);
  return n;
}

static void load_file_locked(const char* path) {
  FILE* f = fopen(path, "r");
  if (f == NULL) return;
  char line[4096];
  while (fgets(line, sizeof(line), f)) parse_line(line);
  fclose(f);
}

static void free_entries_locked(void) {
  while (file_entries) {
    struct file_entry* next = file_entries->next;
    free(file_entries->name);
    free(file_entries->value);
    free(file_entries);
    file_entries = next;
  }
}

static void ensure_files_loaded(void) {
  pthread_mutex_lock(&file_lock);
  if (!files_loaded) {
    files_loaded = 1;
    const char* conf = getenv("NCCL_CONF_FILE");
    if (conf && conf[0]) {
      load_file_locked(conf);
    } else {
      const char* home = getenv("HOME");
      if (home) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/.nccl.conf", home);
        load_file_locked(path);
      }
    }
    load_file_locked("/etc/nccl.conf");
  }
  pthread_mutex_unlock(&file_lock);
}

void weft_param_reload(void) {
  pthread_mutex_lock(&file_lock);
  free_entries_locked();
  files_loaded = 0;
  pthread_mutex_unlock(&file_lock);
}

static const struct weft_param_def* find_def(const char* name) {
  for (int i = 0; i < NPARAMS; i++)
    if (strcmp(params[i].name, name) == 0) return &params[i];
  return NULL;
}

/* Entries are never freed while the process uses them except by weft_param_reload (tests). */
static const char* file_value(const char* name) {
  ensure_files_loaded();
  const char* v = NULL;
  pthread_mutex_lock(&file_lock);
  for (struct file_entry* e = file_entries; e; e = e->next)
    if (strcmp(e->name, name) == 0) v = e->value;
  pthread_mutex_unlock(&file_lock);
  return v;
}

static const char* lookup(const char* name, enum weft_param_source* src) {
  const struct weft_param_def* def = find_def(name);
  if (def == NULL) {
    WEFT_WARN("Internal error: parameter %s is not in the parameter table", name);
    *src = WEFT_SRC_DEFAULT;
    return NULL;
  }
  const char* v = getenv(name);
  if (v != NULL && v[0] != 0) {
    *src = WEFT_SRC_ENV;
    return v;
  }
  v = file_value(name);
  if (v != NULL && v[0] != 0) {
    *src = WEFT_SRC_FILE;
    return v;
  }
  *src = WEFT_SRC_DEFAULT;
  return def->default_value;
}

const char* weft_param_str(const char* name) {
  enum weft_param_source src;
  return lookup(name, &src);
}

int weft_param_is_set(const char* name) { return weft_param_source(name) != WEFT_SRC_DEFAULT; }

enum weft_param_source weft_param_source(const char* name) {
  enum weft_param_source src;
  lookup(name, &src);
  return src;
}

const char* weft_param_source_name(enum weft_param_source src) {
  return src == WEFT_SRC_ENV ? "env" : src == WEFT_SRC_FILE ? "file" : "default";
}

int64_t weft_param_int(const char* name) {
  enum weft_param_source src;
  const char* v = lookup(name, &src);
  const struct weft_param_def* def = find_def(name);
  if (v == NULL) return 0;
  char* end = NULL;
  errno = 0;
  long long x = strtoll(v, &end, 0);
  if (errno == 0 && end != v && *end == 0) return x;
  /* One WARN per parameter: hot paths may read it often. */
  static char warned[sizeof(params) / sizeof(params[0])];
  int index = (int)(def - params);
  if (!__atomic_exchange_n(&warned[index], 1, __ATOMIC_RELAXED))
    WEFT_WARN("Invalid value %s for %s (from %s): not an integer, using default %s", v, name,
              weft_param_source_name(src), def && def->default_value ? def->default_value : "0");
  if (def && def->default_value) return strtoll(def->default_value, NULL, 0);
  return 0;
}

int weft_param_count(void) { return NPARAMS; }

const struct weft_param_def* weft_param_at(int index) {
  return (index >= 0 && index < NPARAMS) ? &params[index] : NULL;
}

const struct weft_param_def* weft_param_find(const char* name) { return name ? find_def(name) : NULL; }

const struct weft_param_def* weft_param_of_ptr(const void* ptr) {
  for (int i = 0; i < NPARAMS; i++)
    if (ptr == (const void*)&params[i]) return &params[i];
  return NULL;
}

const char* weft_param_value_text(const struct weft_param_def* def, char* buf, size_t size) {
  const char* raw = weft_param_str(def->name);
  if (raw == NULL || def->type != WEFT_PARAM_INT) return raw;
  snprintf(buf, size, "%" PRId64, weft_param_int(def->name));
  return buf;
}

void weft_param_dump(FILE* f) {
  char buf[64];
  fprintf(f, "Parameters (%d):\n", NPARAMS);
  for (int i = 0; i < NPARAMS; i++) {
    const struct weft_param_def* def = &params[i];
    const char* v = weft_param_value_text(def, buf, sizeof(buf));
    if (v != NULL && strcmp(def->name, "WEFT_JOB_SECRET") == 0) v = "(set, not shown)";
    fprintf(f, "  %-32s %-16s [%s]\n", def->name, v ? v : "(unset)",
            weft_param_source_name(weft_param_source(def->name)));
    fprintf(f, "      %s\n", def->help);
  }
}
