/* A small strict JSON reader for the flight recorder's dumps: the whole text becomes a tree;
 * anything not JSON is an error with its line and column. */
#ifndef WEFT_TRACE_JSON_H
#define WEFT_TRACE_JSON_H

#include <stddef.h>
#include <stdint.h>

enum json_type { JSON_NULL, JSON_BOOL, JSON_NUM, JSON_STR, JSON_ARR, JSON_OBJ };

struct json {
  enum json_type type;
  int boolean;
  double num;
  uint64_t u64; /* integers read exactly (nanosecond times need all 64 bits) */
  int is_int;
  char* str;         /* JSON_STR */
  char* key;         /* as a member of an object */
  struct json* kids; /* first member or element */
  struct json* next;
};

/* Parses text; on error returns NULL and writes "line L column C: what" into err. */
struct json* json_parse(const char* text, char* err, size_t err_size);
void json_free(struct json* j);
/* The member key of object o, NULL when absent or o is not an object. */
const struct json* json_get(const struct json* o, const char* key);

#endif
