/* Detection once per process, and once per host when core/topo_share.c carries the tree between
 * processes. Reading the machine walks every PCI device (hwloc reads each one's config space), so
 * a process whose threads are hundreds of ranks spent most of its init in the kernel when every
 * communicator detected again, and 256 processes of one host spent half their init on it. The
 * first detection's <system> tree is kept as text and later communicators parse it, as long as
 * the settings that steer detection are the same; the host hash is set for each, since thread
 * ranks may emulate hosts (WEFT_HOSTID). */
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
static int kept_shared; /* the tree came from another process (weft_topo_detect_adopt) */

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

/* Takes key when it keeps xml; returns whether it did. */
static int keep(char* key, const struct weft_xml_node* xml) {
  char* text = NULL;
  size_t len = 0;
  if (weft_xml_write_string(xml, &text, &len) != ncclSuccess) return 0; /* detect again next time */
  free(kept_key);
  free(kept_text);
  kept_key = key;
  kept_text = text;
  kept_len = len;
  kept_method = weft_topo_detect_method();
  kept_shared = 0;
  return 1;
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
    if (res == ncclSuccess && arg->key && keep(arg->key, xml)) arg->key = NULL;
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
  int shared = kept_shared;
  pthread_mutex_unlock(&lock);
  arg.text = text;
  weft_detect_set_method(method);
  ncclResult_t res = weft_detect_finish(fill, &arg, out);
  WEFT_TRACE(WEFT_GRAPH, "Topology detection: the tree %s read before (%s)",
             shared ? "another process of this host" : "this process", method);
  free(text);
  free(arg.key);
  return res;
}

static uint64_t settings_hash(const char* key) {
  uint64_t h = 1469598103934665603ull;
  for (const char* p = key; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  return h;
}

/* Detects into the kept tree unless it holds one read under key. Under the lock. */
static ncclResult_t keep_detected(char* key) {
  if (kept_key && strcmp(kept_key, key) == 0) {
    free(key);
    return ncclSuccess;
  }
  struct weft_xml_node* xml = weft_xml_new("system");
  ncclResult_t res = xml ? weft_xml_set(xml, "version", "1") : ncclSystemError;
  if (res == ncclSuccess) res = weft_detect_machine_xml(xml);
  if (res == ncclSuccess && !keep(key, xml)) res = ncclSystemError;
  if (res != ncclSuccess) free(key);
  weft_xml_free(xml);
  return res;
}

ncclResult_t weft_topo_detect_text(char** text, size_t* len, uint64_t* settings, const char** method) {
  char* key = settings_key();
  if (key == NULL) return ncclSystemError;
  *settings = settings_hash(key);
  pthread_mutex_lock(&lock);
  ncclResult_t res = keep_detected(key);
  *text = NULL;
  if (res == ncclSuccess && (*text = malloc(kept_len)) == NULL) res = ncclSystemError;
  if (res == ncclSuccess) {
    memcpy(*text, kept_text, kept_len);
    *len = kept_len;
    *method = kept_method;
  }
  pthread_mutex_unlock(&lock);
  return res;
}

int weft_topo_detect_adopt(const char* text, size_t len, uint64_t settings, const char* method) {
  char* key = settings_key();
  char* copy = key && len > 0 ? malloc(len) : NULL;
  if (copy == NULL || settings_hash(key) != settings) {
    free(key);
    free(copy);
    return 0;
  }
  memcpy(copy, text, len);
  pthread_mutex_lock(&lock);
  free(kept_key);
  free(kept_text);
  kept_key = key;
  kept_text = copy;
  kept_len = len;
  kept_method = strcmp(method, "hwloc") == 0 ? "hwloc" : "sysfs";
  kept_shared = 1;
  pthread_mutex_unlock(&lock);
  return 1;
}
