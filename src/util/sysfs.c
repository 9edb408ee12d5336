/* Readers of kernel text files (see sysfs.h). */
#include "util/sysfs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int weft_read_line(const char* path, char* buf, size_t size) {
  if (size > 0) buf[0] = 0;
  FILE* f = fopen(path, "r");
  if (f == NULL) return -1;
  char* got = fgets(buf, (int)size, f);
  fclose(f);
  if (got == NULL) {
    buf[0] = 0;
    return -1;
  }
  buf[strcspn(buf, "\n")] = 0;
  return 0;
}

int weft_parse_cpulist(const char* text, cpu_set_t* set) {
  CPU_ZERO(set);
  for (const char* p = text; *p && *p != '\n';) {
    char* end;
    long lo = strtol(p, &end, 10), hi = lo;
    if (end == p) return -1;
    if (*end == '-') hi = strtol(end + 1, &end, 10);
    for (long c = lo; c <= hi && c < CPU_SETSIZE; c++) CPU_SET(c, set);
    p = *end == ',' ? end + 1 : end;
  }
  return 0;
}
