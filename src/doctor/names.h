/* Names the environment check knows beside the parameter table (doctor_names.c). */
#ifndef WEFT_DOCTOR_NAMES_H
#define WEFT_DOCTOR_NAMES_H

extern const char* const weft_doctor_foreign_names[]; /* NULL-terminated */

#endif
