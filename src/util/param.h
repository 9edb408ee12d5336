/* The parameter registry: every environment variable the library reads is listed in param.c. */
#ifndef WEFT_UTIL_PARAM_H
#define WEFT_UTIL_PARAM_H

#include <stdint.h>

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
/* Re-read config files on next access (tests, ncclResetDebugInit). */
void weft_param_reload(void);
/* Parse one config-file text; exposed for tests. Returns entries read. */
int weft_param_load_text(const char* text);

#endif
