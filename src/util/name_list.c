/* NCCL's device-list syntax: prefix or exact names, exclusion, optional ports. */
#include "util/name_list.h"

#include <stdlib.h>
#include <string.h>

/* Whether one entry (len bytes at entry, not terminated) selects name and port. */
static int entry_matches(const char* entry, size_t len, int exact, const char* name, int port) {
  size_t name_len = len;
  if (port > 0) {
    const char* colon = memchr(entry, ':', len);
    if (colon != NULL) {
      name_len = (size_t)(colon - entry);
      if (atoi(colon + 1) != port) return 0; /* atoi stops at the ',' that ends the entry */
    }
  }
  if (name_len == 0) return 0;
  if (exact) return strlen(name) == name_len && strncmp(name, entry, name_len) == 0;
  return strncmp(name, entry, name_len) == 0;
}

int weft_name_list_match(const char* spec, const char* name, int port) {
  if (spec == NULL) return 1;
  int exclude = 0, exact = 0;
  if (*spec == '^') exclude = 1, spec++;
  if (*spec == '=') exact = 1, spec++;
  int matched = 0;
  while (*spec != '\0' && !matched) {
    size_t len = strcspn(spec, ",");
    matched = entry_matches(spec, len, exact, name, port);
    spec += len;
    if (*spec == ',') spec++;
  }
  return exclude ? !matched : matched;
}
