/* Fusion of the topology views of a node's local ranks (each rank may see only its own GPU and
 * NICs): XML trees merged element by element, matched by their identifying attributes. */
#include <stdlib.h>
#include <string.h>

#include "graph/topo.h"
#include "util/check.h"

/* Attributes that identify an element among its siblings (none: the name alone). */
static const char* const* key_attrs(const char* name) {
  static const char* const cpu[] = {"host_hash", "numaid", NULL};
  static const char* const pci[] = {"busid", NULL};
  static const char* const net[] = {"name", "dev", NULL};
  static const char* const nvlink[] = {"target", NULL};
  static const char* const none[] = {NULL};
  if (strcmp(name, "cpu") == 0) return cpu;
  if (strcmp(name, "pci") == 0) return pci;
  if (strcmp(name, "net") == 0) return net;
  if (strcmp(name, "nvlink") == 0) return nvlink;
  return none;
}

static int same_key(const struct weft_xml_node* a, const struct weft_xml_node* b) {
  if (strcmp(a->name, b->name) != 0) return 0;
  for (const char* const* k = key_attrs(a->name); *k; k++) {
    const char *x = weft_xml_get(a, *k), *y = weft_xml_get(b, *k);
    if ((x == NULL) != (y == NULL) || (x && strcmp(x, y) != 0)) return 0;
  }
  return 1;
}

static ncclResult_t copy_into(struct weft_xml_node* parent, const struct weft_xml_node* src) {
  struct weft_xml_node* n = weft_xml_add_child(parent, src->name);
  if (n == NULL) return ncclSystemError;
  n->line = src->line;
  for (int i = 0; i < src->nattrs; i++) WEFT_CHECK(weft_xml_set(n, src->attrs[i].name, src->attrs[i].value));
  for (int i = 0; i < src->nchildren; i++) WEFT_CHECK(copy_into(n, src->children[i]));
  return ncclSuccess;
}

static ncclResult_t merge(struct weft_xml_node* dst, const struct weft_xml_node* src, int depth) {
  for (int i = 0; i < src->nattrs; i++)
    if (weft_xml_get(dst, src->attrs[i].name) == NULL)
      WEFT_CHECK(weft_xml_set(dst, src->attrs[i].name, src->attrs[i].value));
  for (int i = 0; i < src->nchildren; i++) {
    const struct weft_xml_node* c = src->children[i];
    struct weft_xml_node* match = NULL;
    for (int k = 0; k < dst->nchildren && !match; k++)
      if (same_key(dst->children[k], c)) match = dst->children[k];
    if (match && depth < WEFT_XML_MAX_DEPTH)
      WEFT_CHECK(merge(match, c, depth + 1));
    else if (!match)
      WEFT_CHECK(copy_into(dst, c));
  }
  return ncclSuccess;
}

ncclResult_t weft_topo_fuse_text(const char* const* texts, const size_t* lens, int n,
                                 struct weft_topo_system** out) {
  struct weft_topo_system* sys;
  *out = NULL;
  if (n < 1) {
    WEFT_WARN("topology fusion: no views to fuse");
    return ncclInvalidUsage;
  }
  WEFT_CHECK(weft_topo_system_alloc(&sys));
  ncclResult_t res = weft_xml_parse(texts[0], lens[0], "rank 0 view", &sys->xml);
  for (int i = 1; i < n && res == ncclSuccess; i++) {
    struct weft_xml_node* view = NULL;
    char what[32];
    snprintf(what, sizeof(what), "rank %d view", i);
    res = weft_xml_parse(texts[i], lens[i], what, &view);
    if (res == ncclSuccess && strcmp(view->name, sys->xml->name) != 0) {
      WEFT_WARN("topology fusion: %s has top element <%s>, expected <%s>", what, view->name, sys->xml->name);
      res = ncclInvalidUsage;
    }
    if (res == ncclSuccess) res = merge(sys->xml, view, 0);
    weft_xml_free(view);
  }
  if (res == ncclSuccess) res = weft_topo_from_xml(sys);
  if (res != ncclSuccess) {
    weft_topo_system_destroy(sys);
    return res;
  }
  *out = sys;
  return ncclSuccess;
}
