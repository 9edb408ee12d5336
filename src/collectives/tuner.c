/* Tuner plugins: which library (NCCL_TUNER_PLUGIN, else libnccl-tuner.so, else the net plugin's
 * library, NCCL's order), which ABI version it exports, and one context per communicator. */
#include "collectives/tuner.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "graph/graph.h"
#include "util/log.h"
#include "util/param.h"
#include "util/plugin_lib.h"

#define SUBSYS (WEFT_INIT | WEFT_TUNING)

/* The process's plugin library, shared by its communicators: loaded by the first, closed with the
 * last (so a later communicator reads NCCL_TUNER_PLUGIN again). */
struct tuner_lib {
  void* handle;
  int version; /* 2..6 */
  const void* sym;
  char file[512];
  int refs;
};
static pthread_mutex_t lib_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tuner_lib lib;

struct weft_tuner {
  int version;
  const void* sym;
  void* ctx;
  uint64_t identity;
  int warned; /* a failed getCollInfo is WARNed once per communicator */
  int rank;
  char label[160];
};

static const char* sym_name(const void* sym, int version) {
  const char* n =
      version >= 5 ? ((const struct weft_tuner_v5*)sym)->name : ((const struct weft_tuner_v2*)sym)->name;
  return n ? n : "unnamed";
}

/* Newest first: a plugin may export several and means its newest. */
static int find_symbol(void* handle, const void** sym) {
  for (int v = 6; v >= 2; v--) {
    char name[32];
    snprintf(name, sizeof(name), "ncclTunerPlugin_v%d", v);
    *sym = weft_plugin_lib_sym(handle, name);
    if (*sym != NULL) return v;
  }
  return 0;
}

/* NCCL also looks for a tuner in the net plugin's library (NCCL_NET_PLUGIN, else libnccl-net.so):
 * plugins such as aws-ofi-nccl ship both in one file. Finding none there is the usual case. */
static void* open_net_lib(char* file, size_t size) {
  const char* net = weft_param_str("NCCL_NET_PLUGIN");
  if (net != NULL && strcasecmp(net, "none") == 0) return NULL;
  char first[512]; /* NCCL_NET_PLUGIN may list several: the first is the one looked in */
  if (net != NULL) snprintf(first, sizeof(first), "%.*s", (int)strcspn(net, ","), net);
  return weft_plugin_lib_open("TUNER", SUBSYS, "libnccl-net", net ? first : NULL, file, size);
}

static int load_lib(void) {
  const char* name = weft_param_str("NCCL_TUNER_PLUGIN");
  int named = name != NULL && name[0] != 0;
  if (named) WEFT_INFO(WEFT_ENV | WEFT_TUNING, "NCCL_TUNER_PLUGIN set by environment to %s", name);
  if (named && strcasecmp(name, "none") == 0) return 0;
  int from_net = 0;
  lib.handle = weft_plugin_lib_open("TUNER", SUBSYS, "libnccl-tuner", name, lib.file, sizeof(lib.file));
  if (lib.handle == NULL && named)
    WEFT_WARN(
        "NCCL_TUNER_PLUGIN=%s: no such tuner plugin (tried %s and libnccl-tuner-%s.so); looking in the "
        "net plugin's library, else Weft's tuning model decides",
        name, name, name);
  if (lib.handle == NULL) {
    lib.handle = open_net_lib(lib.file, sizeof(lib.file));
    from_net = 1;
  }
  if (lib.handle == NULL) return 0;
  lib.version = find_symbol(lib.handle, &lib.sym);
  if (lib.version == 0) {
    if (named && !from_net)
      WEFT_WARN(
          "NCCL_TUNER_PLUGIN=%s: %s exports none of ncclTunerPlugin_v6 .. _v2; using Weft's tuning model",
          name, lib.file);
    else
      WEFT_INFO(SUBSYS, "TUNER/Plugin: %s has no tuner (ncclTunerPlugin_v6 .. _v2)", lib.file);
    weft_plugin_lib_close(lib.handle);
    lib.handle = NULL;
    return 0;
  }
  WEFT_INFO(SUBSYS, "TUNER/Plugin: loaded tuner %s (v%d) from %s%s", sym_name(lib.sym, lib.version),
            lib.version, lib.file, from_net ? " (the net plugin's library)" : "");
  return 1;
}

/* The settings the last load found nothing with: the next communicator with the same ones does
 * not search (and WARN) again, as NCCL searches once per process; changed ones search anew. */
static char failed_key[1100];
static int failed_valid;

static void settings_key(char* key, size_t size) {
  const char* t = weft_param_str("NCCL_TUNER_PLUGIN");
  const char* n = weft_param_str("NCCL_NET_PLUGIN");
  snprintf(key, size, "%s%c%s", t ? t : "", 1, n ? n : "");
}

static int load_lib_once(void) {
  char key[sizeof(failed_key)];
  settings_key(key, sizeof(key));
  if (failed_valid && strcmp(key, failed_key) == 0) return 0;
  if (load_lib()) return 1;
  snprintf(failed_key, sizeof(failed_key), "%s", key);
  failed_valid = 1;
  return 0;
}

/* Takes a reference on the library, loading it for the first user. 0: no plugin. */
static int lib_ref(int* version, const void** sym, char* file, size_t size) {
  pthread_mutex_lock(&lib_lock);
  int ok = lib.refs > 0 || load_lib_once();
  if (ok) {
    lib.refs++;
    *version = lib.version;
    *sym = lib.sym;
    snprintf(file, size, "%s", lib.file);
  }
  pthread_mutex_unlock(&lib_lock);
  return ok;
}

static void lib_unref(void) {
  pthread_mutex_lock(&lib_lock);
  if (lib.refs > 0 && --lib.refs == 0) {
    WEFT_INFO(SUBSYS, "TUNER/Plugin: closing %s", lib.file);
    weft_plugin_lib_close(lib.handle);
    memset(&lib, 0, sizeof(lib));
  }
  pthread_mutex_unlock(&lib_lock);
}

static void fill_constants(struct weft_tuner_constants* k) {
  double caps[5][4][3];
  weft_tuning_plugin_constants(k->base_lat, k->hw_lat, caps);
  memcpy(k->ll_max_bw, caps[0], sizeof(k->ll_max_bw));
  memcpy(k->ring_ll128_bw, caps[1], sizeof(k->ring_ll128_bw));
  memcpy(k->tree_ll128_bw, caps[2], sizeof(k->tree_ll128_bw));
  memcpy(k->tree_bw, caps[3], sizeof(k->tree_bw));
  memcpy(k->nvls_tree_bw, caps[4], sizeof(k->nvls_tree_bw));
}

/* Each version's init. v5+ may edit the constants: Weft's model does not take them back. */
static ncclResult_t call_init(struct weft_tuner* t, const struct weft_tuner_comm* c) {
  if (t->version < 5) {
    const struct weft_tuner_v2* p = t->sym; /* v2, v3 and v4 share the init */
    return p->init((size_t)c->nranks, (size_t)c->nnodes, (weft_tuner_logger_t)weft_plugin_log, &t->ctx);
  }
  const struct weft_tuner_v5* p = t->sym;
  struct weft_tuner_nvl_domains nvl = {c->nnodes, c->ranks_per_node, c->ranks_per_node};
  struct weft_tuner_constants k, given;
  fill_constants(&k);
  given = k;
  ncclResult_t res = p->init(&t->ctx, c->comm_id, (size_t)c->nranks, (size_t)c->nnodes,
                             (weft_tuner_logger_t)weft_plugin_log, &nvl, &k);
  if (res == ncclSuccess && c->rank == 0 && memcmp(&k, &given, sizeof(k)) != 0)
    WEFT_INFO(WEFT_TUNING, "TUNER/Plugin: %s edited the tuner constants; Weft's model does not use them",
              t->label);
  return res;
}

static uint64_t hash_text(const char* s, uint64_t h) {
  while (*s) h = (h ^ (unsigned char)*s++) * 0x100000001b3ull;
  return h;
}

ncclResult_t weft_tuner_create(const struct weft_tuner_comm* c, struct weft_tuner** out) {
  *out = NULL;
  int version;
  const void* sym;
  char file[512];
  if (!lib_ref(&version, &sym, file, sizeof(file))) return ncclSuccess;
  struct weft_tuner* t = calloc(1, sizeof(*t));
  if (t == NULL) {
    lib_unref();
    return ncclSystemError;
  }
  t->version = version;
  t->sym = sym;
  t->rank = c->rank;
  snprintf(t->label, sizeof(t->label), "%s (v%d)", sym_name(sym, version), version);
  t->identity = hash_text(file, hash_text(t->label, 0xcbf29ce484222325ull)) | 1;
  ncclResult_t res = call_init(t, c);
  if (res != ncclSuccess) {
    WEFT_WARN("rank %d: tuner plugin %s: init failed (%s); this communicator uses Weft's tuning model",
              c->rank, t->label, ncclGetErrorString(res));
    free(t);
    lib_unref();
    return ncclSuccess;
  }
  WEFT_INFO(SUBSYS, "rank %d: tuner plugin %s from %s for %d rank(s) on %d node(s)", c->rank, t->label, file,
            c->nranks, c->nnodes);
  *out = t;
  return ncclSuccess;
}

void weft_tuner_destroy(struct weft_tuner* t) {
  if (t == NULL) return;
  /* v2..v4 call it destroy, v5+ finalize: the same slot after name, init and getCollInfo. */
  ncclResult_t res = t->version >= 5 ? ((const struct weft_tuner_v5*)t->sym)->finalize(t->ctx)
                                     : ((const struct weft_tuner_v2*)t->sym)->destroy(t->ctx);
  if (res != ncclSuccess)
    WEFT_INFO(WEFT_TUNING, "rank %d: tuner plugin %s: finalize returned %s", t->rank, t->label,
              ncclGetErrorString(res));
  free(t);
  lib_unref();
}

uint64_t weft_tuner_identity(const struct weft_tuner* t) { return t ? t->identity : 0; }
const char* weft_tuner_label(const struct weft_tuner* t) { return t ? t->label : "none"; }

/* v2 names a pair instead of editing the table: that pair, if on offer, costs 0 so it wins. */
static ncclResult_t call_v2(const struct weft_tuner* t, int coll, size_t bytes, int pipe_ops,
                            float table[WEFT_TUNER_NALGOS][WEFT_TUNER_NPROTOS], int* nchannels) {
  const struct weft_tuner_v2* p = t->sym;
  int algo = -1, proto = -1;
  /* CollNet and NVLS: never on offer here, so never supported. */
  ncclResult_t res = p->get_coll_info(t->ctx, coll, bytes, 0, 0, pipe_ops, &algo, &proto, nchannels);
  if (res != ncclSuccess) return res;
  if (algo >= 0 && algo < WEFT_TUNER_NALGOS && proto >= 0 && proto < WEFT_TUNER_NPROTOS &&
      table[algo][proto] != WEFT_TUNER_IGNORE)
    table[algo][proto] = 0.0f;
  return ncclSuccess;
}

static ncclResult_t call_coll_info(const struct weft_tuner* t, int coll, size_t bytes, int pipe_ops,
                                   float table[WEFT_TUNER_NALGOS][WEFT_TUNER_NPROTOS], int* nch) {
  float** tab = (float**)table;
  const int na = WEFT_TUNER_NALGOS, np = WEFT_TUNER_NPROTOS;
  switch (t->version) {
    case 2:
      return call_v2(t, coll, bytes, pipe_ops, table, nch);
    case 3:
      return ((const struct weft_tuner_v3*)t->sym)
          ->get_coll_info(t->ctx, coll, bytes, pipe_ops, tab, na, np, nch);
    case 4:
      return ((const struct weft_tuner_v4*)t->sym)
          ->get_coll_info(t->ctx, coll, bytes, pipe_ops, tab, na, np, 0, nch);
    default: /* 5 and 6: the host backend registers no buffers for the plugin to exploit */
      return ((const struct weft_tuner_v5*)t->sym)
          ->get_coll_info(t->ctx, coll, bytes, pipe_ops, tab, na, np, 0, nch);
  }
}

int weft_tuner_coll_info(struct weft_tuner* t, int coll, size_t bytes, int pipe_ops,
                         float table[WEFT_TUNER_NALGOS][WEFT_TUNER_NPROTOS], int* nchannels) {
  *nchannels = 0;
  ncclResult_t res = call_coll_info(t, coll, bytes, pipe_ops, table, nchannels);
  if (res == ncclSuccess) return 1;
  if (!t->warned)
    WEFT_WARN(
        "rank %d: tuner plugin %s: getCollInfo failed (%s) for %s of %zu bytes; Weft's tuning model "
        "decides instead (said once per communicator)",
        t->rank, t->label, ncclGetErrorString(res), weft_func_name(coll), bytes);
  t->warned = 1;
  *nchannels = 0;
  return 0;
}
