/* How the processes of a job meet. Rank and size come from MPI (make MPI=1) or the launcher's
 * variables (util.c). The unique id reaches every process, in this order of preference:
 *   MPI build            rank 0's ncclGetUniqueId, MPI_Bcast (as nccl-tests);
 *   NCCL_COMM_ID         set by the user or weftrun: the library derives the id;
 *   MASTER_ADDR/PORT     (torchrun) NCCL_COMM_ID=MASTER_ADDR:MASTER_PORT+1, since torch's TCPStore
 *                        holds MASTER_PORT;
 *   Slurm (srun)         NCCL_COMM_ID=<first node of SLURM_STEP_NODELIST>:<20000 + (SLURM_JOB_ID %
 *                        1500) * 8 + SLURM_STEP_ID % 8>, where srun puts task 0;
 *   Open MPI, Hydra      rank 0 writes the id to $WEFT_PERF_RENDEZVOUS_DIR (else $TMPDIR, /tmp)
 *                        /weft-perf-<job>.id, the job named by PMIX_NAMESPACE or OMPI_MCA_ess_base_jobid
 *                        (Open MPI) or Hydra's KVS name; multi-host jobs need that directory shared. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef WEFT_PERF_MPI
#include <mpi.h>
#endif

#include "common.h"

enum rdv { RDV_SINGLE, RDV_MPI, RDV_LIBRARY, RDV_FILE };

static struct {
  enum rdv how;
  char file[PATH_MAX]; /* RDV_FILE: where rank 0 leaves the id */
  int wrote;           /* this process wrote file and removes it once every process has the id */
} rdv;

#ifdef WEFT_PERF_MPI
int perf_launch_init(int* argc, char*** argv) { return MPI_Init(argc, argv) == MPI_SUCCESS ? 0 : -1; }
void perf_launch_fini(void) { MPI_Finalize(); }

int perf_launch_world(struct perf_world* w, char* err, size_t errlen) {
  MPI_Comm node;
  MPI_Comm_size(MPI_COMM_WORLD, &w->nprocs);
  MPI_Comm_rank(MPI_COMM_WORLD, &w->proc);
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w->proc, MPI_INFO_NULL, &node) !=
      MPI_SUCCESS) {
    snprintf(err, errlen, "MPI_Comm_split_type failed: cannot tell the ranks of this node");
    return -1;
  }
  MPI_Comm_rank(node, &w->local_rank);
  MPI_Comm_free(&node);
  w->source = "MPI";
  rdv.how = w->nprocs > 1 ? RDV_MPI : RDV_SINGLE;
  return 0;
}
#else
int perf_launch_init(int* argc, char*** argv) {
  (void)argc, (void)argv;
  return 0;
}
void perf_launch_fini(void) {}
int perf_launch_world(struct perf_world* w, char* err, size_t errlen) {
  return perf_world_detect(w, err, errlen);
}
#endif

static int set_comm_id(const char* host, long port, const char* from, char* err, size_t errlen) {
  char v[320];
  if (port < 1 || port > 65535) {
    snprintf(err, errlen, "port %ld derived from %s is not in [1, 65535]: set NCCL_COMM_ID=<host>:<port>",
             port, from);
    return -1;
  }
  snprintf(v, sizeof(v), strchr(host, ':') ? "[%s]:%ld" : "%s:%ld", host, port);
  setenv("NCCL_COMM_ID", v, 1);
  rdv.how = RDV_LIBRARY;
  return 0;
}

static int env_long(const char* name, long* out) {
  const char* s = getenv(name);
  char* end = NULL;
  if (!s || !*s) return -1;
  errno = 0;
  *out = strtol(s, &end, 10);
  return errno || *end ? -1 : 0;
}

/* First host of a Slurm host list: "gpu[03-04,07],cpu1" -> "gpu03", "r[1-2]n[5-6]" -> "r1n5". */
static void slurm_first_host(const char* list, char* out, size_t len) {
  size_t o = 0;
  for (const char* p = list; *p && *p != ',' && o + 1 < len; p++) {
    if (*p != '[') {
      out[o++] = *p;
      continue;
    }
    for (p++; *p && !strchr("-,:]", *p) && o + 1 < len; p++) out[o++] = *p;
    while (*p && *p != ']') p++;
    if (!*p) break;
  }
  out[o] = '\0';
}

/* srun's task 0 runs on the step's first node (block and cyclic distributions): the root goes
 * there, on a port that differs between the steps of a job and between consecutive jobs. */
static int plan_slurm(const struct perf_world* w, char* err, size_t errlen) {
  const char* list = getenv("SLURM_STEP_NODELIST");
  long job, step = 0;
  if (!list) list = getenv("SLURM_JOB_NODELIST");
  /* Only for ranks srun started itself: under mpirun or mpiexec inside an allocation, some ranks
   * see the batch step's SLURM_* and others their daemon's, and all must choose alike. */
  if (strcmp(w->source, "Slurm") != 0 || !list) return 1;
  if (env_long("SLURM_JOB_ID", &job) && env_long("SLURM_JOBID", &job)) return 1;
  env_long("SLURM_STEP_ID", &step);
  char host[256];
  slurm_first_host(list, host, sizeof(host));
  if (!host[0]) return 1;
  return set_comm_id(host, 20000 + (job % 1500) * 8 + step % 8, "SLURM_JOB_ID", err, errlen);
}

static int read_line(int fd, char* buf, size_t len) {
  size_t n = 0;
  while (n + 1 < len) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 10000) != 1 || read(fd, buf + n, 1) != 1) return -1;
    if (buf[n++] == '\n') break;
  }
  buf[n] = '\0';
  return 0;
}

/* MPICH's Hydra names the job only through its PMI-1 socket: ask it for the job's KVS name. */
static int pmi_kvsname(char* out, size_t len) {
  long fd;
  char line[512];
  if (env_long("PMI_FD", &fd) || fd < 0) return -1;
  const char* init = "cmd=init pmi_version=1 pmi_subversion=1\n";
  const char* ask = "cmd=get_my_kvsname\n";
  const char* fini = "cmd=finalize\n";
  if (write((int)fd, init, strlen(init)) < 0 || read_line((int)fd, line, sizeof(line)) ||
      !strstr(line, "rc=0"))
    return -1;
  if (write((int)fd, ask, strlen(ask)) < 0 || read_line((int)fd, line, sizeof(line))) return -1;
  char* k = strstr(line, "kvsname=");
  if (!k) return -1;
  snprintf(out, len, "%.*s", (int)strcspn(k + 8, " \n"), k + 8);
  if (write((int)fd, fini, strlen(fini)) >= 0) read_line((int)fd, line, sizeof(line));
  return out[0] ? 0 : -1;
}

static int plan_file(const struct perf_world* w, char* err, size_t errlen) {
  char key[160] = "";
  const char* v = NULL;
  if (strcmp(w->source, "Open MPI") == 0) {
    v = getenv("PMIX_NAMESPACE");
    if (!v) v = getenv("OMPI_MCA_ess_base_jobid");
    if (!v) v = getenv("OMPI_MCA_orte_hnp_uri");
    if (v) snprintf(key, sizeof(key), "%s", v);
  } else if (strcmp(w->source, "PMI") == 0) {
    pmi_kvsname(key, sizeof(key));
  }
  if (!key[0]) return 1;
  for (char* p = key; *p; p++)
    if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-') *p = '_';
  const char* dir = getenv("WEFT_PERF_RENDEZVOUS_DIR");
  if (!dir || !*dir) dir = getenv("TMPDIR");
  if (!dir || !*dir) dir = "/tmp";
  if (snprintf(rdv.file, sizeof(rdv.file), "%s/weft-perf-%s.id", dir, key) >= (int)sizeof(rdv.file)) {
    snprintf(err, errlen, "rendezvous path in %s is too long", dir);
    return -1;
  }
  rdv.how = RDV_FILE;
  return 0;
}

int perf_launch_plan(const struct perf_world* w, char* err, size_t errlen) {
  const char *addr = getenv("MASTER_ADDR"), *id = getenv("NCCL_COMM_ID");
  long port;
  if (rdv.how == RDV_MPI || w->nprocs == 1) return 0;
  if (id && *id) {
    rdv.how = RDV_LIBRARY;
    return 0;
  }
  /* MASTER_PORT itself is torch's TCPStore: the root takes the next port. */
  if (addr && *addr && !env_long("MASTER_PORT", &port))
    return set_comm_id(addr, port + 1, "MASTER_PORT", err, errlen);
  int rc = plan_slurm(w, err, errlen);
  if (rc <= 0) return rc;
  rc = plan_file(w, err, errlen);
  if (rc <= 0) return rc;
  snprintf(err, errlen,
           "%d processes (from %s) need a rendezvous: set NCCL_COMM_ID=<host>:<port> of rank 0 (weftrun sets "
           "it), or MASTER_ADDR and MASTER_PORT, or use the MPI build (make MPI=1)",
           w->nprocs, w->source);
  return -1;
}

static void hex_encode(const ncclUniqueId* id, char* out) {
  for (size_t i = 0; i < sizeof(id->internal); i++)
    sprintf(out + 2 * i, "%02x", (unsigned char)id->internal[i]);
}

static int hex_decode(const char* s, ncclUniqueId* id) {
  for (size_t i = 0; i < sizeof(id->internal); i++) {
    unsigned v;
    if (!isxdigit((unsigned char)s[2 * i]) || !isxdigit((unsigned char)s[2 * i + 1]) ||
        sscanf(s + 2 * i, "%2x", &v) != 1)
      return -1;
    id->internal[i] = (char)v;
  }
  return s[2 * sizeof(id->internal)] == '\n' ? 0 : -1;
}

/* Written under another name and renamed, so a reader never sees half an id; owner-only, since
 * the id holds the job key. */
static int write_id(const ncclUniqueId* id, char* err, size_t errlen) {
  char tmp[PATH_MAX + 32], text[2 * NCCL_UNIQUE_ID_BYTES + 2];
  hex_encode(id, text);
  strcat(text, "\n");
  snprintf(tmp, sizeof(tmp), "%s.%d.tmp", rdv.file, (int)getpid());
  unlink(rdv.file);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  int ok = fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text);
  if (fd >= 0 && close(fd)) ok = 0;
  if (!ok || rename(tmp, rdv.file)) {
    snprintf(err, errlen, "cannot write the rendezvous file %s: %s (set WEFT_PERF_RENDEZVOUS_DIR)", rdv.file,
             strerror(errno));
    unlink(tmp);
    return -1;
  }
  rdv.wrote = 1;
  return 0;
}

static int read_id(ncclUniqueId* id, int timeout_s, char* err, size_t errlen) {
  char text[2 * NCCL_UNIQUE_ID_BYTES + 2];
  struct timespec nap = {0, 20 * 1000 * 1000};
  for (long waited_ms = 0;; waited_ms += 20) {
    int fd = open(rdv.file, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ssize_t n = read(fd, text, sizeof(text));
      close(fd);
      if (n == (ssize_t)sizeof(text) - 1 && hex_decode(text, id) == 0) return 0;
    }
    if (waited_ms >= timeout_s * 1000L) break;
    nanosleep(&nap, NULL);
  }
  snprintf(err, errlen,
           "rank 0's unique id did not appear in %s within %d s (ranks on other hosts need "
           "WEFT_PERF_RENDEZVOUS_DIR on a shared file system, NCCL_COMM_ID, or the MPI build)",
           rdv.file, timeout_s);
  return -1;
}

int perf_launch_unique_id(const struct perf_world* w, ncclUniqueId* id, char* err, size_t errlen) {
  memset(id, 0, sizeof(*id));
  if ((rdv.how != RDV_MPI && rdv.how != RDV_FILE) || w->proc == 0) {
    ncclResult_t res = ncclGetUniqueId(id);
    if (res != ncclSuccess) {
      snprintf(err, errlen, "ncclGetUniqueId failed: '%s / %s'", ncclGetErrorString(res),
               ncclGetLastError(NULL));
      return PERF_NCCL_ERROR;
    }
  }
#ifdef WEFT_PERF_MPI
  if (rdv.how == RDV_MPI && MPI_Bcast(id, sizeof(*id), MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
    snprintf(err, errlen, "MPI_Bcast of the unique id failed");
    return PERF_INTERNAL;
  }
#endif
  if (rdv.how != RDV_FILE) return PERF_OK;
  if (w->proc == 0) return write_id(id, err, errlen) ? PERF_INTERNAL : PERF_OK;
  long timeout = 300;
  env_long("WEFT_BOOTSTRAP_TIMEOUT", &timeout);
  return read_id(id, (int)timeout, err, errlen) ? PERF_TIMEOUT : PERF_OK;
}

void perf_launch_joined(void) {
  if (rdv.wrote) unlink(rdv.file);
  rdv.wrote = 0;
}
