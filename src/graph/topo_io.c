/* Topology files: load from a path, dump to NCCL's XML, the communicator entry point
 * (NCCL_TOPO_FILE / detection / NCCL_TOPO_DUMP_FILE) and a readable description. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "graph/topo.h"
#include "util/check.h"
#include "util/param.h"

#define MAX_TOPO_FILE (64 << 20)

static ncclResult_t read_file(const char* path, char** text, size_t* len) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) {
    WEFT_WARN("topology: cannot open %s: %s", path, strerror(errno));
    return ncclSystemError;
  }
  size_t cap = 1 << 16, n = 0;
  char* buf = malloc(cap);
  while (buf) {
    if (n == cap) {
      if (cap >= MAX_TOPO_FILE) break;
      char* nb = realloc(buf, cap * 2);
      if (nb == NULL) break;
      buf = nb;
      cap *= 2;
    }
    size_t r = fread(buf + n, 1, cap - n, f);
    n += r;
    if (r == 0) break;
  }
  int err = ferror(f) || buf == NULL || n == cap;
  fclose(f);
  if (err) {
    free(buf);
    WEFT_WARN("topology: cannot read %s (read error or larger than %d bytes)", path, MAX_TOPO_FILE);
    return ncclSystemError;
  }
  *text = buf;
  *len = n;
  return ncclSuccess;
}

ncclResult_t weft_topo_load_file(const char* path, struct weft_topo_system** out) {
  char* text;
  size_t len;
  *out = NULL;
  WEFT_CHECK(read_file(path, &text, &len));
  ncclResult_t res = weft_topo_load_text(text, len, path, out);
  free(text);
  return res;
}

ncclResult_t weft_topo_dump_string(const struct weft_topo_system* sys, char** out) {
  if (sys->xml == NULL) {
    WEFT_WARN("topology: nothing to dump (system has no XML tree)");
    return ncclInvalidUsage;
  }
  return weft_xml_write_string(sys->xml, out, NULL);
}

ncclResult_t weft_topo_dump_file(const struct weft_topo_system* sys, const char* path) {
  if (sys->xml == NULL) {
    WEFT_WARN("topology: nothing to dump (system has no XML tree)");
    return ncclInvalidUsage;
  }
  FILE* f = fopen(path, "w");
  if (f == NULL) {
    WEFT_WARN("topology: cannot write %s: %s", path, strerror(errno));
    return ncclSystemError;
  }
  ncclResult_t res = weft_xml_write(sys->xml, f);
  if (fclose(f) != 0 && res == ncclSuccess) {
    WEFT_WARN("topology: cannot write %s: %s", path, strerror(errno));
    res = ncclSystemError;
  }
  if (res == ncclSuccess) WEFT_INFO(WEFT_GRAPH, "Topology dumped to %s", path);
  return res;
}

const char* weft_topo_file(void) {
  const char* file = weft_param_str("NCCL_TOPO_FILE");
  return file && file[0] ? file : NULL;
}

ncclResult_t weft_topo_get_system(struct weft_topo_system** out) {
  const char* file = weft_topo_file();
  if (file) {
    WEFT_CHECK(weft_topo_load_file(file, out));
  } else {
    WEFT_CHECK(weft_topo_detect_shared(out));
  }
  const char* dump = weft_param_str("NCCL_TOPO_DUMP_FILE");
  if (dump && dump[0]) {
    ncclResult_t res = weft_topo_dump_file(*out, dump);
    if (res != ncclSuccess) {
      weft_topo_system_destroy(*out);
      *out = NULL;
      return res;
    }
  }
  return ncclSuccess;
}

struct text {
  char* buf;
  size_t len, cap;
};

__attribute__((format(printf, 2, 3))) static void tprintf(struct text* t, const char* fmt, ...) {
  va_list ap;
  for (;;) {
    va_start(ap, fmt);
    int n = vsnprintf(t->buf ? t->buf + t->len : NULL, t->buf ? t->cap - t->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (t->buf && t->len + n < t->cap) {
      t->len += n;
      return;
    }
    size_t cap = t->cap ? t->cap * 2 : 4096;
    while (cap < t->len + n + 1) cap *= 2;
    char* b = realloc(t->buf, cap);
    if (b == NULL) return;
    t->buf = b;
    t->cap = cap;
  }
}

static void describe_node(struct text* t, const struct weft_topo_node* n) {
  tprintf(t, "%s/%d", weft_topo_node_name(n->type), n->index);
  if (n->type == WEFT_NODE_GPU && n->u.gpu.host_rank)
    tprintf(t, " host-rank %d", n->u.gpu.rank);
  else if (n->type == WEFT_NODE_GPU)
    tprintf(t, " %s dev %d rank %d sm %d", n->name, n->u.gpu.dev, n->u.gpu.rank, n->u.gpu.sm);
  else if (n->type == WEFT_NODE_NET)
    tprintf(t, " %s dev %d %.1f GB/s port %d gdr %d", n->name, n->u.net.dev, n->u.net.speed_bw, n->u.net.port,
            n->u.net.gdr);
  else
    tprintf(t, " %s", n->name);
  if (n->host) tprintf(t, " host %d", n->host);
  tprintf(t, " :");
  for (int l = 0; l < n->nlinks; l++) {
    static const char* lt[] = {"LOC", "NVL", "?", "C2C", "PCI", "?", "?", "?", "?", "SYS", "NET"};
    const struct weft_topo_link* k = &n->links[l];
    tprintf(t, " %s/%.1f->%s/%d", k->type >= 0 && k->type <= 10 ? lt[k->type] : "?", k->bw_full,
            weft_topo_node_name(k->remote->type), k->remote->index);
  }
  tprintf(t, "\n");
}

ncclResult_t weft_topo_describe(struct weft_topo_system* sys, char** out) {
  struct text t = {0};
  for (int ty = 0; ty < WEFT_NODE_TYPES; ty++)
    for (int i = 0; i < sys->count[ty]; i++) describe_node(&t, &sys->nodes[ty][i]);
  if (t.buf == NULL) t.buf = strdup("");
  if (t.buf == NULL) {
    WEFT_WARN("topology: out of memory describing the system");
    return ncclSystemError;
  }
  *out = t.buf;
  return ncclSuccess;
}
