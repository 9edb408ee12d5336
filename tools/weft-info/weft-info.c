/* weft-info: prints Weft's version, the NCCL API level, the backends built and usable here, and
 * every parameter with its value, source (default / file / env) and help. --json for scripts. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "nccl.h"
#include "util/json.h"
#include "util/param.h"

#define STR2(x) #x
#define STR(x) STR2(x)
#define API_LEVEL STR(NCCL_MAJOR) "." STR(NCCL_MINOR) "." STR(NCCL_PATCH)

struct cuda_state {
  int built;       /* compiled with WEFT_CUDA=1 */
  int driver;      /* libcuda.so.1 could be loaded */
  int init_result; /* cuInit's CUresult, -1 when not called */
  int devices;     /* cuDeviceGetCount, -1 when unknown */
};

/* The driver is loaded with dlopen so that weft-info runs on machines without one. */
static struct cuda_state probe_cuda(void) {
  struct cuda_state s = {0, 0, -1, -1};
#if defined(WEFT_CUDA) && WEFT_CUDA
  s.built = 1;
#endif
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) return s;
  s.driver = 1;
  int (*init)(unsigned int) = (int (*)(unsigned int))dlsym(lib, "cuInit");
  int (*count)(int*) = (int (*)(int*))dlsym(lib, "cuDeviceGetCount");
  if (init != NULL && count != NULL) {
    s.init_result = init(0);
    int n = 0;
    if (s.init_result == 0 && count(&n) == 0) s.devices = n;
  }
  /* Not closed: some drivers do not support being unloaded after cuInit. */
  return s;
}

static const char* cuda_text(const struct cuda_state* s, char* buf, size_t size) {
  if (!s->driver)
    snprintf(buf, size, "no driver (libcuda.so.1 not found)");
  else if (s->init_result != 0)
    snprintf(buf, size, "driver present, cuInit failed (CUresult %d)", s->init_result);
  else
    snprintf(buf, size, "%d device(s)", s->devices);
  return buf;
}

static void print_text(const struct cuda_state* cuda) {
  char buf[256];
  int version = 0;
  ncclGetVersion(&version);
  printf("Weft %s, NCCL API %s (NCCL_VERSION_CODE %d, ncclGetVersion %d)\n", WEFT_VERSION_STRING, API_LEVEL,
         NCCL_VERSION_CODE, version);
  printf("Backends:\n  host   built, usable\n");
  printf("  cuda   %s; %s\n", cuda->built ? "built" : "not built", cuda_text(cuda, buf, sizeof(buf)));
  weft_param_dump(stdout); /* the same text as ncclParamDumpAll */
}

static void print_json(const struct cuda_state* cuda) {
  char buf[256];
  int version = 0;
  ncclGetVersion(&version);
  printf(
      "{\"weft_version\": \"%s\", \"nccl_api\": \"%s\", \"nccl_version_code\": %d, \"library_version\": "
      "%d,\n",
      WEFT_VERSION_STRING, API_LEVEL, NCCL_VERSION_CODE, version);
  printf(" \"backends\": {\"host\": {\"built\": true, \"usable\": true},\n");
  printf("  \"cuda\": {\"built\": %s, \"driver\": %s, \"cuInit\": %d, \"devices\": %d}},\n",
         cuda->built ? "true" : "false", cuda->driver ? "true" : "false", cuda->init_result, cuda->devices);
  printf(" \"parameters\": [");
  for (int i = 0; i < weft_param_count(); i++) {
    const struct weft_param_def* def = weft_param_at(i);
    printf("%s\n  {\"name\": ", i ? "," : "");
    weft_json_string(stdout, def->name);
    printf(", \"type\": \"%s\", \"value\": ", def->type == WEFT_PARAM_INT ? "int" : "string");
    weft_json_string(stdout, weft_param_value_text(def, buf, sizeof(buf)));
    printf(", \"default\": ");
    weft_json_string(stdout, def->default_value);
    printf(", \"source\": \"%s\", \"help\": ", weft_param_source_name(weft_param_source(def->name)));
    weft_json_string(stdout, def->help);
    putchar('}');
  }
  printf("\n ]}\n");
}

int main(int argc, char** argv) {
  int json = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) {
      json = 1;
    } else {
      fprintf(stderr, "usage: %s [--json]\n", argv[0]);
      return strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0 ? 0 : 2;
    }
  }
  struct cuda_state cuda = probe_cuda();
  if (json)
    print_json(&cuda);
  else
    print_text(&cuda);
  return 0;
}
