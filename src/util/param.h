/* The parameter registry: every environment variable the library reads is listed in param.c. */
#ifndef WEFT_UTIL_PARAM_H
#define WEFT_UTIL_PARAM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum weft_param_type { WEFT_PARAM_INT, WEFT_PARAM_STR };
enum weft_param_source { WEFT_SRC_DEFAULT, WEFT_SRC_FILE, WEFT_SRC_ENV };

struct weft_param_def {
  const char* name;
  enum weft_param_type type;
  const char* default_value; /* NULL: unset unless given */
  const char* help;
};

/* Integer value (environment, then config file, then default). A value that is not an integer
 * gives one WARN and the default. */
int64_t weft_param_int(const char* name);
/* String value, or NULL when unset and without default. */
const char* weft_param_str(const char* name);
/* Whether the environment or a config file gave the parameter a value. */
int weft_param_is_set(const char* name);
enum weft_param_source weft_param_source(const char* name);
const char* weft_param_source_name(enum weft_param_source src);
/* Walk every registered parameter in table order (weft-info). */
int weft_param_count(void);
const struct weft_param_def* weft_param_at(int index);
/* The table entry of name, NULL (without a WARN) when the table has none. */
const struct weft_param_def* weft_param_find(const char* name);
/* The table entry a pointer is the address of, NULL when it points anywhere else (handles from users). */
const struct weft_param_def* weft_param_of_ptr(const void* ptr);
/* The value a parameter has now as text (integers as the library reads them, in decimal);
 * NULL when unset and without default. buf holds integers' text. */
const char* weft_param_value_text(const struct weft_param_def* def, char* buf, size_t size);
/* Every parameter with its value, source and help, as weft-info prints them. */
void weft_param_dump(FILE* f);
/* Re-read config files on next access (tests, ncclResetDebugInit). */
void weft_param_reload(void);
/* Parse one config-file text; exposed for tests. Returns entries read. */
int weft_param_load_text(const char* text);

#endif
