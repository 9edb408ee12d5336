/* Detection once per process. Reading the machine walks every PCI device (hwloc reads each one's
 * config space), so a process whose threads are hundreds of ranks spent most of its init in the
 * kernel when every communicator detected again. The first detection's <system> tree is kept as
 * text and later communicators parse it, as long as the settings that steer detection are the
 * same; the host hash is set for each, since thread ranks may emulate hosts (WEFT_HOSTID). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/detect.h"
#include "graph/graph.h"
#include "graph/xml.h"
#include "util/check.h"
#include "util/log.h"
#include "util/param.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char* kept_key;
static char* kept_text;
static size_t kept_len;
static const char* kept_method;

static const char* or_empty(const char* s) { return s ? s : ""; }

static char* settings_key(void) {
  const char* names[] = {"WEFT_TOPO_DETECT", "WEFT_TOPO_SYSFS", "WEFT_HWLOC_XML", "WEFT_HWLOC_LIB"};
  size_t len = 0;
  char* key = NULL;
  FILE* f = open_memstream(&key, &len);
  if (f == NULL) return NULL;
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    fprintf(f, "%s\n", or_empty(weft_param_str(names[i])));
  fprintf(f, "%s\n", or_empty(getenv("HWLOC_XMLFILE")));
  fclose(f);
  return key;
}

/* A copy of the kept tree's text when it was read under these settings. Under the lock. */
static char* kept_copy(const char* key, size_t* len, const char** method) {
  char* copy = NULL;
  if (kept_key && strcmp(kept_key, key) == 0 && (copy = malloc(kept_len)) != NULL) {
    memcpy(copy, kept_text, kept_len);
    *len = kept_len;
    *method = kept_method;
  }
  return copy;
}

static void keep(char* key, const struct weft_xml_node* xml) {
  char* text = NULL;
  size_t len = 0;
  if (weft_xml_write_string(xml, &text, &len) != ncclSuccess) return; /* detect again next time */
  free(kept_key);
  free(kept_text);
  kept_key = key;
  kept_text = text;
  kept_len = len;
  kept_method = weft_topo_detect_method();
}

struct fill_arg {
  char* key;        /* owned; handed to keep() after a fresh detection */
  const char* text; /* the kept tree, or NULL to detect */
  size_t len;
};

static ncclResult_t fill(struct weft_xml_node* xml, void* argp) {
  struct fill_arg* arg = argp;
  if (arg->text == NULL) {
    ncclResult_t res = weft_detect_machine_xml(xml);
    if (res == ncclSuccess && arg->key) {
      keep(arg->key, xml);
      arg->key = NULL;
    }
    return res;
  }
  struct weft_xml_node* root;
  WEFT_CHECK(weft_xml_parse(arg->text, arg->len, "the topology detected earlier", &root));
  weft_xml_swap(xml, root);
  weft_xml_free(root);
  return ncclSuccess;
}

/* The lock is held through a fresh detection: ranks that start together wait for the first one's
 * tree rather than all reading the machine at once. */
ncclResult_t weft_topo_detect_shared(struct weft_topo_system** out) {
  struct fill_arg arg = {.key = settings_key()};
  const char* method = NULL;
  pthread_mutex_lock(&lock);
  char* text = arg.key ? kept_copy(arg.key, &arg.len, &method) : NULL;
  if (text == NULL) {
    ncclResult_t res = weft_detect_finish(fill, &arg, out);
    pthread_mutex_unlock(&lock);
    free(arg.key);
    return res;
  }
  pthread_mutex_unlock(&lock);
  arg.text = text;
  weft_detect_set_method(method);
  ncclResult_t res = weft_detect_finish(fill, &arg, out);
  WEFT_TRACE(WEFT_GRAPH, "Topology detection: the tree this process read before (%s)", method);
  free(text);
  free(arg.key);
  return res;
}
