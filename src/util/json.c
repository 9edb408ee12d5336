/* JSON string literals for the tools (see json.h). */
#include "util/json.h"

void weft_json_string(FILE* f, const char* s) {
  if (s == NULL) {
    fputs("null", f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}
