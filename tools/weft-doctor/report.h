/* weft-doctor's two outputs: text for people, JSON for programs. */
#ifndef WEFT_DOCTOR_TOOL_REPORT_H
#define WEFT_DOCTOR_TOOL_REPORT_H

#include <stdio.h>

#include "doctor/doctor.h"

void doctor_print_text(FILE* f, const struct weft_doctor_report* r, int problems_only);
void doctor_print_json(FILE* f, const struct weft_doctor_report* r);

#endif
