/* The one JSON string writer of the tools' --json outputs (weft-info, weft-topo, weft-doctor, weft-trace)
 * and of the flight recorder's dumps. */
#ifndef WEFT_UTIL_JSON_H
#define WEFT_UTIL_JSON_H

#include <stdio.h>

/* s as a JSON string literal, quotes, backslashes and control characters escaped; NULL as null. */
void weft_json_string(FILE* f, const char* s);

#endif
