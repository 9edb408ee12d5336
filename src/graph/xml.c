/* XML tree for topology and graph files: a lenient, bounded parser (comments, declarations,
 * missing attributes, no trailing newline) with line-numbered errors, and a writer. */
#include "graph/xml.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/log.h"

struct parser {
  const char* p;
  const char* end;
  int line;
  int nodes;
  const char* what;
  int open_line; /* where the last comment or declaration began */
};

static void node_free_fields(struct weft_xml_node* n) {
  for (int i = 0; i < n->nattrs; i++) {
    free(n->attrs[i].name);
    free(n->attrs[i].value);
  }
  free(n->attrs);
  free(n->children);
  free(n->name);
}

void weft_xml_free(struct weft_xml_node* node) {
  if (node == NULL) return;
  for (int i = 0; i < node->nchildren; i++) weft_xml_free(node->children[i]);
  node_free_fields(node);
  free(node);
}

struct weft_xml_node* weft_xml_new(const char* name) {
  struct weft_xml_node* n = calloc(1, sizeof(*n));
  if (n == NULL) return NULL;
  n->name = strdup(name);
  if (n->name == NULL) {
    free(n);
    return NULL;
  }
  return n;
}

static int append_child(struct weft_xml_node* parent, struct weft_xml_node* child) {
  if (parent->nchildren == parent->capchildren) {
    int cap = parent->capchildren ? parent->capchildren * 2 : 4;
    struct weft_xml_node** c = realloc(parent->children, cap * sizeof(*c));
    if (c == NULL) return -1;
    parent->children = c;
    parent->capchildren = cap;
  }
  parent->children[parent->nchildren++] = child;
  child->parent = parent;
  return 0;
}

struct weft_xml_node* weft_xml_add_child(struct weft_xml_node* parent, const char* name) {
  struct weft_xml_node* n = weft_xml_new(name);
  if (n == NULL) return NULL;
  if (append_child(parent, n) != 0) {
    weft_xml_free(n);
    return NULL;
  }
  return n;
}

static struct weft_xml_attr* find_attr(const struct weft_xml_node* node, const char* name) {
  for (int i = 0; i < node->nattrs; i++)
    if (strcmp(node->attrs[i].name, name) == 0) return &node->attrs[i];
  return NULL;
}

/* Takes ownership of value (malloc'ed). */
static ncclResult_t set_owned(struct weft_xml_node* node, const char* name, char* value) {
  struct weft_xml_attr* a = find_attr(node, name);
  if (a != NULL) {
    free(a->value);
    a->value = value;
    return ncclSuccess;
  }
  struct weft_xml_attr* attrs = realloc(node->attrs, (node->nattrs + 1) * sizeof(*attrs));
  if (attrs == NULL) goto oom;
  node->attrs = attrs;
  attrs[node->nattrs].name = strdup(name);
  if (attrs[node->nattrs].name == NULL) goto oom;
  attrs[node->nattrs].value = value;
  node->nattrs++;
  return ncclSuccess;
oom:
  free(value);
  WEFT_WARN("XML: out of memory setting attribute %s", name);
  return ncclSystemError;
}

ncclResult_t weft_xml_set(struct weft_xml_node* node, const char* name, const char* value) {
  char* v = strdup(value ? value : "");
  if (v == NULL) {
    WEFT_WARN("XML: out of memory setting attribute %s", name);
    return ncclSystemError;
  }
  return set_owned(node, name, v);
}

ncclResult_t weft_xml_set_int(struct weft_xml_node* node, const char* name, long long value) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%lld", value);
  return weft_xml_set(node, name, buf);
}

ncclResult_t weft_xml_set_hex(struct weft_xml_node* node, const char* name, unsigned long long value) {
  char buf[32];
  snprintf(buf, sizeof(buf), "0x%llx", value);
  return weft_xml_set(node, name, buf);
}

void weft_xml_swap(struct weft_xml_node* a, struct weft_xml_node* b) {
  struct weft_xml_node* pa = a->parent; /* each keeps its place in its own tree */
  struct weft_xml_node* pb = b->parent;
  struct weft_xml_node t = *a;
  *a = *b;
  *b = t;
  a->parent = pa;
  b->parent = pb;
  for (int i = 0; i < a->nchildren; i++) a->children[i]->parent = a;
  for (int i = 0; i < b->nchildren; i++) b->children[i]->parent = b;
}

void weft_xml_unset(struct weft_xml_node* node, const char* name) {
  struct weft_xml_attr* a = find_attr(node, name);
  if (a == NULL) return;
  free(a->name);
  free(a->value);
  *a = node->attrs[--node->nattrs];
}

const char* weft_xml_get(const struct weft_xml_node* node, const char* name) {
  struct weft_xml_attr* a = find_attr(node, name);
  return a ? a->value : NULL;
}

long long weft_xml_get_int(const struct weft_xml_node* node, const char* name, long long def) {
  const char* v = weft_xml_get(node, name);
  if (v == NULL || v[0] == 0) return def;
  char* end;
  errno = 0;
  long long x = strtoll(v, &end, 0);
  if (end == v || errno != 0) {
    unsigned long long u = strtoull(v, &end, 0); /* 64-bit hex hashes above LLONG_MAX */
    if (end == v) return def;
    return (long long)u;
  }
  return x;
}

double weft_xml_get_double(const struct weft_xml_node* node, const char* name, double def) {
  const char* v = weft_xml_get(node, name);
  if (v == NULL || v[0] == 0) return def;
  char* end;
  double x = strtod(v, &end);
  return end == v ? def : x;
}

/* ---- parser ---- */

static ncclResult_t perr(struct parser* ps, const char* msg) {
  WEFT_WARN("XML %s line %d: %s", ps->what ? ps->what : "(text)", ps->line, msg);
  return ncclInvalidUsage;
}

static void advance(struct parser* ps, size_t n) {
  for (size_t i = 0; i < n && ps->p < ps->end; i++, ps->p++)
    if (*ps->p == '\n') ps->line++;
}

static void skip_space(struct parser* ps) {
  while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\r' || *ps->p == '\n'))
    advance(ps, 1);
}

static int starts(struct parser* ps, const char* s) {
  size_t n = strlen(s);
  return (size_t)(ps->end - ps->p) >= n && memcmp(ps->p, s, n) == 0;
}

/* Skips to just after `term`; returns -1 when the input ends first. */
static int skip_past(struct parser* ps, const char* term) {
  while (ps->p < ps->end) {
    if (starts(ps, term)) {
      advance(ps, strlen(term));
      return 0;
    }
    advance(ps, 1);
  }
  return -1;
}

static int is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == ':' || c == '.';
}

static char* read_name(struct parser* ps) {
  const char* s = ps->p;
  while (ps->p < ps->end && is_name_char(*ps->p)) ps->p++;
  if (ps->p == s) return NULL;
  return strndup(s, ps->p - s);
}

/* Decodes the five predefined entities and numeric character references below 128. */
static char* decode(const char* s, size_t n) {
  char* out = malloc(n + 1);
  if (out == NULL) return NULL;
  size_t o = 0;
  static const struct {
    const char* ent;
    char c;
  } ents[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
  for (size_t i = 0; i < n;) {
    int done = 0;
    if (s[i] == '&') {
      for (size_t e = 0; e < sizeof(ents) / sizeof(ents[0]) && !done; e++) {
        size_t l = strlen(ents[e].ent);
        if (n - i >= l && memcmp(s + i, ents[e].ent, l) == 0) {
          out[o++] = ents[e].c;
          i += l;
          done = 1;
        }
      }
    }
    if (!done) out[o++] = s[i++];
  }
  out[o] = 0;
  return out;
}

static ncclResult_t parse_attrs(struct parser* ps, struct weft_xml_node* n, int* selfclose) {
  for (;;) {
    skip_space(ps);
    if (ps->p >= ps->end) return perr(ps, "input ends inside a tag");
    if (*ps->p == '>') {
      advance(ps, 1);
      *selfclose = 0;
      return ncclSuccess;
    }
    if (starts(ps, "/>")) {
      advance(ps, 2);
      *selfclose = 1;
      return ncclSuccess;
    }
    if (n->nattrs >= WEFT_XML_MAX_ATTRS) return perr(ps, "too many attributes");
    char* name = read_name(ps);
    if (name == NULL) return perr(ps, "expected an attribute name, '>' or '/>'");
    skip_space(ps);
    char* value = NULL;
    if (ps->p < ps->end && *ps->p == '=') {
      advance(ps, 1);
      skip_space(ps);
      if (ps->p >= ps->end || (*ps->p != '"' && *ps->p != '\'')) {
        free(name);
        return perr(ps, "attribute value must be quoted");
      }
      char q = *ps->p;
      int start_line = ps->line;
      advance(ps, 1);
      const char* s = ps->p;
      while (ps->p < ps->end && *ps->p != q && *ps->p != '<') advance(ps, 1);
      if (ps->p >= ps->end || *ps->p != q) {
        free(name);
        ps->line = start_line;
        return perr(ps, "unterminated attribute value");
      }
      value = decode(s, ps->p - s);
      advance(ps, 1);
    } else {
      value = strdup(""); /* bare attribute: accepted as empty */
    }
    ncclResult_t res = value ? set_owned(n, name, value) : ncclSystemError;
    free(name);
    if (res != ncclSuccess) return res;
  }
}

/* Skips comments, declarations, processing instructions and text until the next tag.
 * Returns 1 when at a '<' that starts an element or end tag, 0 at end of input, -1 on error. */
static int next_tag(struct parser* ps) {
  for (;;) {
    while (ps->p < ps->end && *ps->p != '<') advance(ps, 1);
    if (ps->p >= ps->end) return 0;
    ps->open_line = ps->line;
    if (starts(ps, "<!--")) {
      if (skip_past(ps, "-->") != 0) return -1;
    } else if (starts(ps, "<?")) {
      if (skip_past(ps, "?>") != 0) return -1;
    } else if (starts(ps, "<!")) {
      if (skip_past(ps, ">") != 0) return -1;
    } else {
      return 1;
    }
  }
}

static ncclResult_t parse_element(struct parser* ps, struct weft_xml_node* parent, int depth,
                                  struct weft_xml_node** out);

static ncclResult_t parse_children(struct parser* ps, struct weft_xml_node* n, int depth) {
  for (;;) {
    int t = next_tag(ps);
    if (t < 0) {
      ps->line = ps->open_line;
      return perr(ps, "unterminated comment or declaration");
    }
    if (t == 0) return perr(ps, "input ends before the closing tag");
    if (starts(ps, "</")) {
      int line = ps->line;
      advance(ps, 2);
      char* name = read_name(ps);
      skip_space(ps);
      int ok = name && strcmp(name, n->name) == 0 && ps->p < ps->end && *ps->p == '>';
      free(name);
      if (!ok) {
        char msg[160];
        ps->line = line;
        snprintf(msg, sizeof(msg), "closing tag does not match <%.60s> opened on line %d", n->name, n->line);
        return perr(ps, msg);
      }
      advance(ps, 1);
      return ncclSuccess;
    }
    WEFT_CHECK(parse_element(ps, n, depth + 1, NULL));
  }
}

static ncclResult_t parse_element(struct parser* ps, struct weft_xml_node* parent, int depth,
                                  struct weft_xml_node** out) {
  if (depth >= WEFT_XML_MAX_DEPTH) return perr(ps, "elements nested too deeply");
  if (++ps->nodes > WEFT_XML_MAX_NODES) return perr(ps, "too many elements");
  int line = ps->line;
  advance(ps, 1); /* '<' */
  char* name = read_name(ps);
  if (name == NULL) return perr(ps, "expected an element name after '<'");
  struct weft_xml_node* n = calloc(1, sizeof(*n));
  if (n == NULL) {
    free(name);
    return perr(ps, "out of memory");
  }
  n->name = name;
  n->line = line;
  if (parent && append_child(parent, n) != 0) {
    weft_xml_free(n);
    return perr(ps, "out of memory");
  }
  if (out) *out = n;
  int selfclose = 0;
  ncclResult_t res = parse_attrs(ps, n, &selfclose);
  if (res == ncclSuccess && !selfclose) res = parse_children(ps, n, depth);
  if (res != ncclSuccess && parent == NULL) {
    weft_xml_free(n);
    if (out) *out = NULL;
  }
  return res;
}

ncclResult_t weft_xml_parse(const char* text, size_t len, const char* what, struct weft_xml_node** root) {
  struct parser ps = {text, text + len, 1, 0, what, 1};
  *root = NULL;
  if (text == NULL) return perr(&ps, "no input");
  int t = next_tag(&ps);
  if (t < 0) {
    ps.line = ps.open_line;
    return perr(&ps, "unterminated comment or declaration");
  }
  if (t == 0) return perr(&ps, "no element found");
  if (starts(&ps, "</")) return perr(&ps, "closing tag without an opening tag");
  struct weft_xml_node* n = NULL;
  WEFT_CHECK(parse_element(&ps, NULL, 0, &n));
  t = next_tag(&ps);
  if (t != 0) {
    weft_xml_free(n);
    return perr(&ps, t < 0 ? "unterminated comment after the root element"
                           : "content after the root element (only one top element is allowed)");
  }
  *root = n;
  return ncclSuccess;
}

/* ---- writer ---- */

struct sink {
  FILE* f;
  char* buf;
  size_t len, cap;
  int failed;
};

static void put(struct sink* s, const char* str, size_t n) {
  if (s->failed) return;
  if (s->f) {
    if (fwrite(str, 1, n, s->f) != n) s->failed = 1;
    return;
  }
  if (s->len + n + 1 > s->cap) {
    size_t cap = s->cap ? s->cap : 1024;
    while (cap < s->len + n + 1) cap *= 2;
    char* b = realloc(s->buf, cap);
    if (b == NULL) {
      s->failed = 1;
      return;
    }
    s->buf = b;
    s->cap = cap;
  }
  memcpy(s->buf + s->len, str, n);
  s->len += n;
  s->buf[s->len] = 0;
}

static void puts_(struct sink* s, const char* str) { put(s, str, strlen(str)); }

static void put_escaped(struct sink* s, const char* v) {
  for (; *v; v++) {
    switch (*v) {
      case '&':
        puts_(s, "&amp;");
        break;
      case '<':
        puts_(s, "&lt;");
        break;
      case '>':
        puts_(s, "&gt;");
        break;
      case '"':
        puts_(s, "&quot;");
        break;
      default:
        put(s, v, 1);
    }
  }
}

static void write_node(struct sink* s, const struct weft_xml_node* n, int depth) {
  for (int i = 0; i < depth; i++) puts_(s, "  ");
  puts_(s, "<");
  puts_(s, n->name);
  for (int i = 0; i < n->nattrs; i++) {
    puts_(s, " ");
    puts_(s, n->attrs[i].name);
    puts_(s, "=\"");
    put_escaped(s, n->attrs[i].value);
    puts_(s, "\"");
  }
  if (n->nchildren == 0) {
    puts_(s, "/>\n");
    return;
  }
  puts_(s, ">\n");
  for (int i = 0; i < n->nchildren; i++) write_node(s, n->children[i], depth + 1);
  for (int i = 0; i < depth; i++) puts_(s, "  ");
  puts_(s, "</");
  puts_(s, n->name);
  puts_(s, ">\n");
}

ncclResult_t weft_xml_write(const struct weft_xml_node* root, FILE* out) {
  struct sink s = {out, NULL, 0, 0, 0};
  write_node(&s, root, 0);
  if (s.failed) {
    WEFT_WARN("XML: write failed: %s", strerror(errno));
    return ncclSystemError;
  }
  return ncclSuccess;
}

ncclResult_t weft_xml_write_string(const struct weft_xml_node* root, char** out, size_t* len) {
  struct sink s = {NULL, NULL, 0, 0, 0};
  write_node(&s, root, 0);
  if (s.failed) {
    free(s.buf);
    WEFT_WARN("XML: out of memory writing the tree");
    return ncclSystemError;
  }
  *out = s.buf;
  if (len) *len = s.len;
  return ncclSuccess;
}
