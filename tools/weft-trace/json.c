/* Strict JSON (RFC 8259) into a tree: no comments, no trailing commas, no NaN; \u escapes are
 * kept only for ASCII (the dumps write nothing else). Depth is bounded. */
#include "json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 32

struct parser {
  const char* s;
  size_t pos;
  char* err;
  size_t err_size;
  int failed;
};

static void fail(struct parser* p, const char* what) {
  if (p->failed) return;
  p->failed = 1;
  int line = 1, col = 1;
  for (size_t i = 0; i < p->pos && p->s[i]; i++) {
    if (p->s[i] == '\n')
      line++, col = 1;
    else
      col++;
  }
  snprintf(p->err, p->err_size, "line %d column %d: %s", line, col, what);
}

static void skip_ws(struct parser* p) {
  while (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' || p->s[p->pos] == '\r')
    p->pos++;
}

static struct json* node(struct parser* p, enum json_type t) {
  struct json* j = calloc(1, sizeof(*j));
  if (j == NULL)
    fail(p, "out of memory");
  else
    j->type = t;
  return j;
}

static int hex_digit(char h) {
  if (h >= '0' && h <= '9') return h - '0';
  if (h >= 'a' && h <= 'f') return h - 'a' + 10;
  if (h >= 'A' && h <= 'F') return h - 'A' + 10;
  return -1;
}

/* The byte a one-letter escape stands for; 0 for a letter JSON does not define. */
static unsigned char unescape(char e) {
  switch (e) {
    case '"':
      return '"';
    case '\\':
      return '\\';
    case '/':
      return '/';
    case 'b':
      return '\b';
    case 'f':
      return '\f';
    case 'n':
      return '\n';
    case 'r':
      return '\r';
    case 't':
      return '\t';
    default:
      return 0;
  }
}

static char* parse_string(struct parser* p) {
  if (p->s[p->pos] != '"') return fail(p, "expected a string"), NULL;
  p->pos++;
  size_t cap = 16, n = 0;
  char* out = malloc(cap);
  while (out) {
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c == 0 || c < 0x20) break;
    p->pos++;
    if (c == '"') {
      out[n] = 0;
      return out;
    }
    if (c == '\\') {
      char e = p->s[p->pos++];
      if (e == 'u') {
        unsigned v = 0;
        for (int i = 0; i < 4; i++) {
          int d = hex_digit(p->s[p->pos++]);
          if (d < 0) return free(out), fail(p, "bad \\u escape"), NULL;
          v = v * 16 + (unsigned)d;
        }
        c = v < 0x80 ? (unsigned char)v : '?';
      } else if ((c = unescape(e)) == 0) {
        return free(out), fail(p, "bad escape in a string"), NULL;
      }
    }
    if (n + 2 > cap) {
      char* bigger = realloc(out, cap *= 2);
      if (bigger == NULL) break;
      out = bigger;
    }
    out[n++] = (char)c;
  }
  free(out);
  fail(p, "unterminated string or control character in it");
  return NULL;
}

static struct json* parse_number(struct parser* p) {
  const char* start = p->s + p->pos;
  size_t i = 0;
  if (start[i] == '-') i++;
  if (start[i] == '0')
    i++;
  else if (start[i] >= '1' && start[i] <= '9')
    while (start[i] >= '0' && start[i] <= '9') i++;
  else
    return fail(p, "expected a value"), NULL;
  int is_int = 1;
  if (start[i] == '.') {
    is_int = 0, i++;
    if (!(start[i] >= '0' && start[i] <= '9')) return fail(p, "bad number"), NULL;
    while (start[i] >= '0' && start[i] <= '9') i++;
  }
  if (start[i] == 'e' || start[i] == 'E') {
    is_int = 0, i++;
    if (start[i] == '+' || start[i] == '-') i++;
    if (!(start[i] >= '0' && start[i] <= '9')) return fail(p, "bad number"), NULL;
    while (start[i] >= '0' && start[i] <= '9') i++;
  }
  struct json* j = node(p, JSON_NUM);
  if (j == NULL) return NULL;
  j->num = strtod(start, NULL);
  j->is_int = is_int && start[0] != '-';
  if (j->is_int) j->u64 = strtoull(start, NULL, 10);
  p->pos += i;
  return j;
}

static struct json* parse_value(struct parser* p, int depth);

/* Members of an object (keys) or elements of an array, after the opening bracket. */
static struct json* parse_list(struct parser* p, int depth, int obj) {
  struct json* j = node(p, obj ? JSON_OBJ : JSON_ARR);
  if (j == NULL) return NULL;
  struct json** tail = &j->kids;
  char close = obj ? '}' : ']';
  skip_ws(p);
  if (p->s[p->pos] == close) {
    p->pos++;
    return j;
  }
  for (;;) {
    char* key = NULL;
    skip_ws(p);
    if (obj) {
      if ((key = parse_string(p)) == NULL) break;
      skip_ws(p);
      if (p->s[p->pos] != ':') {
        free(key);
        fail(p, "expected ':'");
        break;
      }
      p->pos++;
    }
    struct json* kid = parse_value(p, depth + 1);
    if (kid == NULL) {
      free(key);
      break;
    }
    kid->key = key;
    *tail = kid;
    tail = &kid->next;
    skip_ws(p);
    if (p->s[p->pos] == ',') {
      p->pos++;
      continue;
    }
    if (p->s[p->pos] == close) {
      p->pos++;
      return j;
    }
    fail(p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
    break;
  }
  json_free(j);
  return NULL;
}

static struct json* parse_word(struct parser* p, const char* word, enum json_type t, int b) {
  if (strncmp(p->s + p->pos, word, strlen(word)) != 0) return fail(p, "expected a value"), NULL;
  p->pos += strlen(word);
  struct json* j = node(p, t);
  if (j) j->boolean = b;
  return j;
}

static struct json* parse_value(struct parser* p, int depth) {
  if (depth > MAX_DEPTH) return fail(p, "nested too deep"), NULL;
  skip_ws(p);
  char c = p->s[p->pos];
  if (c == '{' || c == '[') {
    p->pos++;
    return parse_list(p, depth, c == '{');
  }
  if (c == '"') {
    char* s = parse_string(p);
    struct json* j = s ? node(p, JSON_STR) : NULL;
    if (j)
      j->str = s;
    else
      free(s);
    return j;
  }
  if (c == 't') return parse_word(p, "true", JSON_BOOL, 1);
  if (c == 'f') return parse_word(p, "false", JSON_BOOL, 0);
  if (c == 'n') return parse_word(p, "null", JSON_NULL, 0);
  return parse_number(p);
}

struct json* json_parse(const char* text, char* err, size_t err_size) {
  struct parser p = {text, 0, err, err_size, 0};
  struct json* j = parse_value(&p, 0);
  if (j != NULL) {
    skip_ws(&p);
    if (p.s[p.pos] != 0) {
      fail(&p, "text after the value");
      json_free(j);
      j = NULL;
    }
  }
  return j;
}

void json_free(struct json* j) {
  while (j) {
    struct json* next = j->next;
    json_free(j->kids);
    free(j->str);
    free(j->key);
    free(j);
    j = next;
  }
}

const struct json* json_get(const struct json* o, const char* key) {
  if (o == NULL || o->type != JSON_OBJ) return NULL;
  for (const struct json* k = o->kids; k; k = k->next)
    if (strcmp(k->key, key) == 0) return k;
  return NULL;
}
