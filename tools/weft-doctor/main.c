/* weft-doctor: checks the environment a job will meet (shared memory, ptrace/CMA, memlock,
 * interfaces and reachability, PCIe, GPUs, NUMA, variables, other ranks' settings) and prints
 * each finding with its fix. Exit 0 when nothing blocks a job, 1 when something does, 2 on usage. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor.h"
#include "report.h"

#define MAX_PEERS 64

static void usage(FILE* f) {
  fprintf(f,
          "usage: weft-doctor [--ranks N] [-H host1,host2 | --hostfile FILE] [--port P] [--timeout-ms T]\n"
          "                   [--peer-env FILE]... [--json] [--problems]\n"
          "  --ranks N         ranks the job runs on this host (sizes /dev/shm; default: the launcher's\n"
          "                    LOCAL_WORLD_SIZE and the like, else one per GPU, else 1)\n"
          "  -H LIST           other hosts (names or addresses) to reach through NCCL_SOCKET_IFNAME\n"
          "  --hostfile FILE   the same, one host per line ('host slots=N' and # comments allowed)\n"
          "  --port P          TCP port probed on each host (default 1: a refusal proves the route)\n"
          "  --timeout-ms T    wait per probe (default 2000)\n"
          "  --peer-env FILE   another rank's environment (env > FILE, or /proc/PID/environ) to compare\n"
          "  --json            one JSON object instead of text\n"
          "  --problems        print only findings that are not ok\n"
          "Exit status: 0 nothing blocks a job, 1 something does, 2 bad usage.\n");
}

static int parse_int(const char* opt, const char* v, int lo, int hi) {
  char* end = NULL;
  errno = 0;
  long x = v ? strtol(v, &end, 10) : 0;
  if (v == NULL || errno || end == v || *end || x < lo || x > hi) {
    fprintf(stderr, "weft-doctor: %s takes an integer in [%d, %d], got '%s'\n", opt, lo, hi, v ? v : "");
    exit(2);
  }
  return (int)x;
}

/* Host names of a host file, comma-joined: the first word of each line. */
static char* read_hostfile(const char* path) {
  FILE* f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "weft-doctor: cannot open host file %s: %s\n", path, strerror(errno));
    exit(2);
  }
  size_t cap = 4096, len = 0;
  char* list = calloc(1, cap);
  char line[512];
  while (list && fgets(line, sizeof(line), f)) {
    char host[256];
    if (sscanf(line, " %255[^ \t\n#]", host) != 1) continue;
    if (len + strlen(host) + 2 > cap) {
      char* bigger = realloc(list, cap *= 2);
      if (bigger == NULL) break;
      list = bigger;
    }
    len += (size_t)snprintf(list + len, cap - len, "%s%s", len ? "," : "", host);
  }
  fclose(f);
  return list;
}

static const char* need_value(int argc, char** argv, int* i) {
  if (*i + 1 >= argc) {
    fprintf(stderr, "weft-doctor: %s needs a value\n", argv[*i]);
    exit(2);
  }
  return argv[++*i];
}

int main(int argc, char** argv) {
  struct weft_doctor_opts o = {0};
  const char* peers[MAX_PEERS];
  int json = 0, problems = 0;
  char* from_file = NULL; /* the last --hostfile's hosts */
  o.peers = peers;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    if (strcmp(a, "--ranks") == 0)
      o.ranks = parse_int(a, need_value(argc, argv, &i), 1, 1 << 20);
    else if (strcmp(a, "-H") == 0 || strcmp(a, "--hosts") == 0)
      o.hosts = need_value(argc, argv, &i);
    else if (strcmp(a, "--hostfile") == 0) {
      free(from_file); /* a later one replaces it, as -H does */
      o.hosts = from_file = read_hostfile(need_value(argc, argv, &i));
    } else if (strcmp(a, "--port") == 0)
      o.port = parse_int(a, need_value(argc, argv, &i), 1, 65535);
    else if (strcmp(a, "--timeout-ms") == 0)
      o.timeout_ms = parse_int(a, need_value(argc, argv, &i), 1, 600000);
    else if (strcmp(a, "--peer-env") == 0 && o.npeers < MAX_PEERS)
      peers[o.npeers++] = need_value(argc, argv, &i);
    else if (strcmp(a, "--peer-env") == 0) {
      fprintf(stderr, "weft-doctor: at most %d --peer-env files\n", MAX_PEERS);
      return 2;
    } else if (strcmp(a, "--json") == 0)
      json = 1;
    else if (strcmp(a, "--problems") == 0)
      problems = 1;
    else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "weft-doctor: unknown option '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  struct weft_doctor_report r = {0};
  weft_doctor_run(&o, &r);
  if (json)
    doctor_print_json(stdout, &r);
  else
    doctor_print_text(stdout, &r, problems);
  int blocks = weft_doctor_worst(&r) == WEFT_DOCTOR_BLOCK;
  weft_doctor_report_free(&r);
  free(from_file);
  return blocks ? 1 : 0;
}
