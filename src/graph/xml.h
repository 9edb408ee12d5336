/* A small XML tree: parse NCCL topology / graph files (lenient, bounded, line-numbered errors)
 * and write them back in the same shape. Knows nothing about topology. */
#ifndef WEFT_GRAPH_XML_H
#define WEFT_GRAPH_XML_H

#include <stddef.h>
#include <stdio.h>

#include "nccl.h"

#define WEFT_XML_MAX_DEPTH 64
#define WEFT_XML_MAX_ATTRS 64
#define WEFT_XML_MAX_NODES 200000

struct weft_xml_attr {
  char* name;
  char* value;
};

struct weft_xml_node {
  char* name;
  struct weft_xml_attr* attrs;
  int nattrs;
  struct weft_xml_node** children;
  int nchildren;
  int capchildren;
  struct weft_xml_node* parent;
  int line; /* line of the start tag in the source, 0 when built in memory */
};

/* Parses text (need not be NUL-terminated) into a tree whose root is the single top element.
 * Comments, <?...?> and <!...> declarations and text content are skipped. On malformed input
 * returns ncclInvalidUsage after one WARN naming `what` (file name) and the line. */
ncclResult_t weft_xml_parse(const char* text, size_t len, const char* what, struct weft_xml_node** root);
void weft_xml_free(struct weft_xml_node* node);

/* Builders (in-memory trees for detection and dumps). NULL on allocation failure. */
struct weft_xml_node* weft_xml_new(const char* name);
struct weft_xml_node* weft_xml_add_child(struct weft_xml_node* parent, const char* name);
ncclResult_t weft_xml_set(struct weft_xml_node* node, const char* name, const char* value);
ncclResult_t weft_xml_set_int(struct weft_xml_node* node, const char* name, long long value);
ncclResult_t weft_xml_set_hex(struct weft_xml_node* node, const char* name, unsigned long long value);
void weft_xml_unset(struct weft_xml_node* node, const char* name);
/* Exchanges the contents (name, attributes, children) of two nodes; parents stay. */
void weft_xml_swap(struct weft_xml_node* a, struct weft_xml_node* b);

/* Attribute value or NULL when absent. */
const char* weft_xml_get(const struct weft_xml_node* node, const char* name);
/* Integer attribute (decimal or 0x hex); def when absent, empty or not a number. */
long long weft_xml_get_int(const struct weft_xml_node* node, const char* name, long long def);
double weft_xml_get_double(const struct weft_xml_node* node, const char* name, double def);

/* Writes the tree with two-space indentation, one element per line. */
ncclResult_t weft_xml_write(const struct weft_xml_node* root, FILE* out);
/* Same, into a malloc'ed NUL-terminated string. */
ncclResult_t weft_xml_write_string(const struct weft_xml_node* root, char** out, size_t* len);

#endif
