/* weft-doctor's checks of the environment a job meets, as library code: each check family adds
 * findings (what was seen, how to fix it) to a report; the tool prints them and init reuses some. */
#ifndef WEFT_DOCTOR_DOCTOR_H
#define WEFT_DOCTOR_DOCTOR_H

#include <stddef.h>

enum weft_doctor_severity {
  WEFT_DOCTOR_OK,    /* checked, nothing to fix */
  WEFT_DOCTOR_INFO,  /* worth knowing, nothing fails because of it */
  WEFT_DOCTOR_WARN,  /* a job runs, but slower, or fails with NVIDIA NCCL or some configurations */
  WEFT_DOCTOR_BLOCK, /* a job as configured fails or hangs */
};

struct weft_doctor_finding {
  char id[32]; /* stable check name, e.g. "shm.size"; library WARNs name it too */
  enum weft_doctor_severity severity;
  char seen[640]; /* what the check read, with the values */
  char fix[640];  /* what to do about it; empty for OK */
};

struct weft_doctor_report {
  struct weft_doctor_finding* items;
  int count, cap;
};

/* What the job will look like; zero values mean "unknown, assume the common case". */
struct weft_doctor_opts {
  int ranks;                /* ranks of the job on this host; 0: see weft_doctor_local_ranks */
  const char* hosts;        /* comma list of other hosts (names or addresses) to reach; NULL: none */
  int port;                 /* TCP port probed on each host (a refused connection still proves a route) */
  int timeout_ms;           /* per probe */
  const char* const* env;   /* NAME=value list to check, NULL-terminated; NULL: this process's */
  const char* const* peers; /* files of other ranks' environments (env output or /proc/PID/environ) */
  int npeers;
};

const char* weft_doctor_severity_name(enum weft_doctor_severity s);

/* Appends a finding; seen is printf-formatted, fix is copied (NULL: none). Returns the new entry
 * (so a caller can format fix too), or NULL when memory ran out. */
struct weft_doctor_finding* weft_doctor_add(struct weft_doctor_report* r, const char* id,
                                            enum weft_doctor_severity sev, const char* fix,
                                            const char* seen_fmt, ...) __attribute__((format(printf, 5, 6)));
void weft_doctor_report_free(struct weft_doctor_report* r);
/* The worst severity in the report (OK for an empty one). */
enum weft_doctor_severity weft_doctor_worst(const struct weft_doctor_report* r);

/* Every check family in order. Returns the number of findings added. */
int weft_doctor_run(const struct weft_doctor_opts* o, struct weft_doctor_report* r);

/* One family each (doctor_<family>.c). */
void weft_doctor_check_shm(const struct weft_doctor_opts* o, struct weft_doctor_report* r);
void weft_doctor_check_ptrace(const struct weft_doctor_opts* o, struct weft_doctor_report* r);
void weft_doctor_check_memlock(const struct weft_doctor_opts* o, struct weft_doctor_report* r);
void weft_doctor_check_gdr(const struct weft_doctor_opts* o, struct weft_doctor_report* r);
void weft_doctor_check_net(const struct weft_doctor_opts* o, struct weft_doctor_report* r);
void weft_doctor_check_pcie(const struct weft_doctor_opts* o, struct weft_doctor_report* r);
void weft_doctor_check_gpus(const struct weft_doctor_opts* o, struct weft_doctor_report* r);
void weft_doctor_check_numa(const struct weft_doctor_opts* o, struct weft_doctor_report* r);
void weft_doctor_check_env(const struct weft_doctor_opts* o, struct weft_doctor_report* r);
void weft_doctor_check_ranks(const struct weft_doctor_opts* o, struct weft_doctor_report* r);

/* Files of /proc and /sys are read under WEFT_DOCTOR_ROOT (empty: the real ones), so tests can
 * plant each misconfiguration in a fake tree. The root-prefixed path goes to buf. */
const char* weft_doctor_path(char* buf, size_t size, const char* path);
/* The first line (without newline) of a root-prefixed file; -1 when unreadable. */
int weft_doctor_read_line(const char* path, char* buf, size_t size);
/* Whether PCI device dev (a bus id under /sys/bus/pci/devices) is an NVIDIA GPU: vendor 0x10de,
 * class 0x0300xx (VGA) or 0x0302xx (3D controller). */
int weft_doctor_is_nvidia_gpu(const char* dev);
/* NAME's value in the job's environment (opts->env, else this process's); NULL when unset. */
const char* weft_doctor_env_get(const struct weft_doctor_opts* o, const char* name);
/* Ranks the job runs on this host: --ranks, else a launcher's variable (WEFT_LOCAL_NRANKS,
 * LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS, SLURM_NTASKS_PER_NODE), else one
 * per GPU, else 1; *from names where the number came from. */
int weft_doctor_local_ranks(const struct weft_doctor_opts* o, const char** from);
/* Number of RDMA devices (/sys/class/infiniband under the root); the first one's name goes to
 * first. */
int weft_doctor_rdma_devices(char* first, size_t size);
/* Number of GPUs (NVIDIA display/3D controllers) on the PCI bus under the root. */
int weft_doctor_count_gpus(void);

/* Bytes of shared memory one rank of this configuration maps at init and at most (trees, p2p). */
void weft_doctor_shm_need(size_t* at_init, size_t* at_most);

/* The known name (parameter table or names other NCCL builds and plugins read) closest to an
 * unknown NCCL_* / WEFT_* name, NULL when it is known or nothing is close. */
const char* weft_doctor_env_suggest(const char* name, int* known);
/* Init's use: one WARN per misspelt variable of this process, the first time it is called. */
void weft_doctor_warn_env_once(void);

#endif
