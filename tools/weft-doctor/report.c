/* Printing a doctor report: one block per finding for people, or one JSON object. */
#include "report.h"

#include <string.h>

#include "util/json.h"

void doctor_print_text(FILE* f, const struct weft_doctor_report* r, int problems_only) {
  int counts[WEFT_DOCTOR_BLOCK + 1] = {0};
  for (int i = 0; i < r->count; i++) {
    const struct weft_doctor_finding* x = &r->items[i];
    counts[x->severity]++;
    if (problems_only && x->severity == WEFT_DOCTOR_OK) continue;
    fprintf(f, "%-6s %-16s %s\n", weft_doctor_severity_name(x->severity), x->id, x->seen);
    if (x->fix[0] && x->severity != WEFT_DOCTOR_OK) fprintf(f, "       %-16s fix: %s\n", "", x->fix);
  }
  fprintf(f, "weft-doctor: %d ok, %d info, %d warn, %d blocking: %s\n", counts[WEFT_DOCTOR_OK],
          counts[WEFT_DOCTOR_INFO], counts[WEFT_DOCTOR_WARN], counts[WEFT_DOCTOR_BLOCK],
          counts[WEFT_DOCTOR_BLOCK] ? "a job would fail here" : "nothing blocks a job");
}

void doctor_print_json(FILE* f, const struct weft_doctor_report* r) {
  enum weft_doctor_severity worst = weft_doctor_worst(r);
  fprintf(f, "{\"blocks\": %s, \"worst\": \"%s\", \"findings\": [",
          worst == WEFT_DOCTOR_BLOCK ? "true" : "false", weft_doctor_severity_name(worst));
  for (int i = 0; i < r->count; i++) {
    const struct weft_doctor_finding* x = &r->items[i];
    fprintf(f, "%s\n  {\"id\": ", i ? "," : "");
    weft_json_string(f, x->id);
    fprintf(f, ", \"severity\": \"%s\", \"seen\": ", weft_doctor_severity_name(x->severity));
    weft_json_string(f, x->seen);
    fprintf(f, ", \"fix\": ");
    weft_json_string(f, x->fix);
    fputc('}', f);
  }
  fprintf(f, "\n]}\n");
}
