/* The report every check writes into, the fake-root file access the checks share, and the order
 * in which weft-doctor runs the check families. */
#include "doctor/doctor.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/param.h"
#include "util/sysfs.h"

const char* weft_doctor_severity_name(enum weft_doctor_severity s) {
  switch (s) {
    case WEFT_DOCTOR_OK:
      return "ok";
    case WEFT_DOCTOR_INFO:
      return "info";
    case WEFT_DOCTOR_WARN:
      return "warn";
    case WEFT_DOCTOR_BLOCK:
      return "blocks";
  }
  return "?";
}

struct weft_doctor_finding* weft_doctor_add(struct weft_doctor_report* r, const char* id,
                                            enum weft_doctor_severity sev, const char* fix,
                                            const char* seen_fmt, ...) {
  if (r->count == r->cap) {
    int cap = r->cap ? 2 * r->cap : 16;
    struct weft_doctor_finding* items = realloc(r->items, (size_t)cap * sizeof(*items));
    if (items == NULL) return NULL;
    r->items = items;
    r->cap = cap;
  }
  struct weft_doctor_finding* f = &r->items[r->count++];
  memset(f, 0, sizeof(*f));
  snprintf(f->id, sizeof(f->id), "%s", id);
  f->severity = sev;
  va_list ap;
  va_start(ap, seen_fmt);
  vsnprintf(f->seen, sizeof(f->seen), seen_fmt, ap);
  va_end(ap);
  snprintf(f->fix, sizeof(f->fix), "%s", fix ? fix : "");
  return f;
}

void weft_doctor_report_free(struct weft_doctor_report* r) {
  if (r == NULL) return;
  free(r->items);
  memset(r, 0, sizeof(*r));
}

enum weft_doctor_severity weft_doctor_worst(const struct weft_doctor_report* r) {
  enum weft_doctor_severity worst = WEFT_DOCTOR_OK;
  for (int i = 0; i < r->count; i++)
    if (r->items[i].severity > worst) worst = r->items[i].severity;
  return worst;
}

int weft_doctor_run(const struct weft_doctor_opts* o, struct weft_doctor_report* r) {
  int before = r->count;
  weft_doctor_check_shm(o, r);
  weft_doctor_check_ptrace(o, r);
  weft_doctor_check_memlock(o, r);
  weft_doctor_check_gdr(o, r);
  weft_doctor_check_net(o, r);
  weft_doctor_check_pcie(o, r);
  weft_doctor_check_gpus(o, r);
  weft_doctor_check_numa(o, r);
  weft_doctor_check_env(o, r);
  weft_doctor_check_ranks(o, r);
  return r->count - before;
}

const char* weft_doctor_path(char* buf, size_t size, const char* path) {
  const char* root = weft_param_str("WEFT_DOCTOR_ROOT");
  snprintf(buf, size, "%s%s", root ? root : "", path);
  return buf;
}

int weft_doctor_read_line(const char* path, char* buf, size_t size) {
  char full[1024];
  return weft_read_line(weft_doctor_path(full, sizeof(full), path), buf, size);
}

int weft_doctor_is_nvidia_gpu(const char* dev) {
  char path[512], vendor[32], cls[32];
  snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/vendor", dev);
  if (weft_doctor_read_line(path, vendor, sizeof(vendor)) != 0 || strcmp(vendor, "0x10de") != 0) return 0;
  snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/class", dev);
  if (weft_doctor_read_line(path, cls, sizeof(cls)) != 0) return 0;
  return strncmp(cls, "0x0300", 6) == 0 || strncmp(cls, "0x0302", 6) == 0;
}

int weft_doctor_rdma_devices(char* first, size_t size) {
  char path[512];
  DIR* d = opendir(weft_doctor_path(path, sizeof(path), "/sys/class/infiniband"));
  if (d == NULL) return 0;
  int n = 0;
  for (struct dirent* e; (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.' && n++ == 0) snprintf(first, size, "%.63s", e->d_name);
  closedir(d);
  return n;
}

int weft_doctor_count_gpus(void) {
  char dir[512];
  DIR* d = opendir(weft_doctor_path(dir, sizeof(dir), "/sys/bus/pci/devices"));
  if (d == NULL) return 0;
  int n = 0;
  for (struct dirent* e; (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.' && weft_doctor_is_nvidia_gpu(e->d_name)) n++;
  closedir(d);
  return n;
}

extern char** environ;

/* The variables are the job's, which the tool may be given instead of its own; CUDA_VISIBLE_DEVICES
 * and the like are not parameters, so the table's lookup does not apply. */
const char* weft_doctor_env_get(const struct weft_doctor_opts* o, const char* name) {
  const char* const* env = o && o->env ? o->env : (const char* const*)environ;
  size_t n = strlen(name);
  for (int i = 0; env && env[i]; i++)
    if (strncmp(env[i], name, n) == 0 && env[i][n] == '=') return env[i] + n + 1;
  return NULL;
}

/* Launchers tell each rank how many share its host; weft-doctor started the same way learns it. */
static const char* const local_size_vars[] = {"WEFT_LOCAL_NRANKS",          "LOCAL_WORLD_SIZE",
                                              "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                                              "SLURM_NTASKS_PER_NODE",      NULL};

int weft_doctor_local_ranks(const struct weft_doctor_opts* o, const char** from) {
  if (o->ranks > 0) {
    *from = "--ranks";
    return o->ranks;
  }
  for (int i = 0; local_size_vars[i]; i++) {
    const char* v = weft_doctor_env_get(o, local_size_vars[i]);
    int n = v ? atoi(v) : 0;
    if (n > 0) {
      *from = local_size_vars[i];
      return n;
    }
  }
  int gpus = weft_doctor_count_gpus();
  *from = gpus > 0 ? "one per GPU" : "no --ranks, no launcher variable, no GPU: 1";
  return gpus > 0 ? gpus : 1;
}
