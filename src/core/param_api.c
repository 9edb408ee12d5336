/* ncclParam* (NCCL 2.30): the parameter API over Weft's one parameter table (util/param.c). A
 * handle is the address of its table entry, so binding a key twice gives the same handle; values
 * are the ones the library itself reads (environment, then config file, then default). */
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/api.h"
#include "util/check.h"
#include "util/log.h"
#include "util/param.h"

/* Strings handed out stay valid until the same function is called again on the same thread, as
 * NCCL promises: one buffer per thread and function, grown on demand, freed at thread exit. */
enum { BUF_STR, BUF_PARAMETER, NBUFS };
struct thread_bufs {
  char* p[NBUFS];
  size_t cap[NBUFS];
};
static pthread_key_t bufs_key;
static pthread_once_t bufs_once = PTHREAD_ONCE_INIT;

static void free_bufs(void* arg) {
  struct thread_bufs* b = arg;
  for (int i = 0; i < NBUFS; i++) free(b->p[i]);
  free(b);
}
static void make_key(void) { pthread_key_create(&bufs_key, free_bufs); }

static ncclResult_t thread_copy(int which, const char* text, const char** out) {
  pthread_once(&bufs_once, make_key);
  struct thread_bufs* b = pthread_getspecific(bufs_key);
  if (b == NULL && ((b = calloc(1, sizeof(*b))) == NULL || pthread_setspecific(bufs_key, b) != 0)) {
    free(b);
    WEFT_WARN("ncclParam: out of memory for a thread's value buffer");
    return ncclSystemError;
  }
  size_t n = strlen(text) + 1;
  if (n > b->cap[which]) {
    char* p = realloc(b->p[which], n);
    if (p == NULL) {
      WEFT_WARN("ncclParam: out of memory copying a value of %zu bytes", n);
      return ncclSystemError;
    }
    b->p[which] = p;
    b->cap[which] = n;
  }
  memcpy(b->p[which], text, n);
  *out = b->p[which];
  return ncclSuccess;
}

static const struct weft_param_def* def_of(ncclParamHandle_t h) { return weft_param_of_ptr(h); }

WEFT_API(ncclResult_t, ncclParamBind, ncclParamHandle_t* out, const char* key) {
  WEFT_ARG_CHECK(out != NULL, "ncclParamBind: out is NULL (key %s)", key ? key : "(null)");
  WEFT_ARG_CHECK(key != NULL, "ncclParamBind: key is NULL");
  const struct weft_param_def* def = weft_param_find(key);
  WEFT_ARG_CHECK(def != NULL, "ncclParamBind: unknown parameter key \"%s\" (build/bin/weft-info lists them)",
                 key);
  *out = (ncclParamHandle_t)(uintptr_t)def;
  return ncclSuccess;
}

/* An integer parameter's value for a getter whose type holds lo..hi. Unset without default is no
 * value at all; a value outside the type is refused rather than truncated. */
static ncclResult_t get_int(ncclParamHandle_t h, const void* out, const char* fn, int64_t lo, uint64_t hi,
                            int64_t* v) {
  const struct weft_param_def* def = def_of(h);
  WEFT_ARG_CHECK(def != NULL, "%s: handle %p did not come from ncclParamBind", fn, (void*)h);
  WEFT_ARG_CHECK(out != NULL, "%s: out is NULL (parameter %s)", fn, def->name);
  WEFT_ARG_CHECK(def->type == WEFT_PARAM_INT, "%s: %s is a string parameter (read it with ncclParamGetStr)",
                 fn, def->name);
  if (weft_param_str(def->name) == NULL) {
    WEFT_WARN("%s: parameter %s is unset and has no default", fn, def->name);
    return ncclInvalidUsage;
  }
  int64_t x = weft_param_int(def->name);
  WEFT_ARG_CHECK(x >= lo && (x < 0 || (uint64_t)x <= hi),
                 "%s: parameter %s = %" PRId64 " (from %s) does not fit the type (%" PRId64 "..%" PRIu64 ")",
                 fn, def->name, x, weft_param_source_name(weft_param_source(def->name)), lo, hi);
  *v = x;
  return ncclSuccess;
}

#define WEFT_PARAM_GETTER(name, type, lo, hi)                    \
  WEFT_API(ncclResult_t, name, ncclParamHandle_t h, type* out) { \
    int64_t v = 0;                                               \
    WEFT_CHECK(get_int(h, out, #name, lo, hi, &v));              \
    *out = (type)v;                                              \
    return ncclSuccess;                                          \
  }

WEFT_PARAM_GETTER(ncclParamGetI8, int8_t, INT8_MIN, INT8_MAX)
WEFT_PARAM_GETTER(ncclParamGetI16, int16_t, INT16_MIN, INT16_MAX)
WEFT_PARAM_GETTER(ncclParamGetI32, int32_t, INT32_MIN, INT32_MAX)
WEFT_PARAM_GETTER(ncclParamGetI64, int64_t, INT64_MIN, INT64_MAX)
WEFT_PARAM_GETTER(ncclParamGetU8, uint8_t, 0, UINT8_MAX)
WEFT_PARAM_GETTER(ncclParamGetU16, uint16_t, 0, UINT16_MAX)
WEFT_PARAM_GETTER(ncclParamGetU32, uint32_t, 0, UINT32_MAX)
WEFT_PARAM_GETTER(ncclParamGetU64, uint64_t, 0, UINT64_MAX)

/* A string parameter; NULL when it is unset and has no default. */
WEFT_API(ncclResult_t, ncclParamGetStr, ncclParamHandle_t h, const char** out) {
  const struct weft_param_def* def = def_of(h);
  WEFT_ARG_CHECK(def != NULL, "ncclParamGetStr: handle %p did not come from ncclParamBind", (void*)h);
  WEFT_ARG_CHECK(out != NULL, "ncclParamGetStr: out is NULL (parameter %s)", def->name);
  WEFT_ARG_CHECK(def->type == WEFT_PARAM_STR,
                 "ncclParamGetStr: %s is an integer parameter (read it with ncclParamGetI64 and the like)",
                 def->name);
  const char* v = weft_param_str(def->name);
  if (v == NULL) {
    *out = NULL;
    return ncclSuccess;
  }
  return thread_copy(BUF_STR, v, out);
}

/* Raw bytes: an integer parameter is its int64_t, a string one its bytes with the NUL; unset
 * without default is zero bytes. *len is the length the value needs, also when maxLen is too
 * small, so a caller can size its buffer. */
WEFT_API(ncclResult_t, ncclParamGet, ncclParamHandle_t h, void* out, int maxLen, int* len) {
  const struct weft_param_def* def = def_of(h);
  WEFT_ARG_CHECK(def != NULL, "ncclParamGet: handle %p did not come from ncclParamBind", (void*)h);
  WEFT_ARG_CHECK(len != NULL, "ncclParamGet: len is NULL (parameter %s)", def->name);
  WEFT_ARG_CHECK(maxLen >= 0 && (out != NULL || maxLen == 0),
                 "ncclParamGet: out %p with maxLen %d (parameter %s)", out, maxLen, def->name);
  const char* text = weft_param_str(def->name);
  int64_t x = text != NULL && def->type == WEFT_PARAM_INT ? weft_param_int(def->name) : 0;
  const void* src = def->type == WEFT_PARAM_INT ? (const void*)&x : (const void*)text;
  size_t need = text == NULL ? 0 : def->type == WEFT_PARAM_INT ? sizeof(x) : strlen(text) + 1;
  WEFT_ARG_CHECK(need <= (size_t)INT32_MAX, "ncclParamGet: the value of %s is %zu bytes long", def->name,
                 need);
  *len = (int)need;
  WEFT_ARG_CHECK(need <= (size_t)maxLen, "ncclParamGet: maxLen %d is too small for %s, which needs %zu bytes",
                 maxLen, def->name, need);
  if (need) memcpy(out, src, need);
  return ncclSuccess;
}

/* By key, as text (integers in decimal, as the library reads them). */
WEFT_API(ncclResult_t, ncclParamGetParameter, const char* key, const char** value, int* valueLen) {
  WEFT_ARG_CHECK(key != NULL, "ncclParamGetParameter: key is NULL");
  WEFT_ARG_CHECK(value != NULL && valueLen != NULL,
                 "ncclParamGetParameter: value %p or valueLen %p is NULL (key %s)", (void*)value,
                 (void*)valueLen, key);
  *value = NULL;
  *valueLen = 0;
  const struct weft_param_def* def = weft_param_find(key);
  WEFT_ARG_CHECK(def != NULL, "ncclParamGetParameter: unknown parameter key \"%s\"", key);
  char buf[32];
  const char* v = weft_param_value_text(def, buf, sizeof(buf));
  if (v == NULL) return ncclSuccess;
  WEFT_CHECK(thread_copy(BUF_PARAMETER, v, value));
  *valueLen = (int)strlen(*value);
  return ncclSuccess;
}

/* Every key of the table, in table order; the table is built once and never changes. */
static const char** all_keys;
static int nkeys;
static pthread_once_t keys_once = PTHREAD_ONCE_INIT;

static void build_keys(void) {
  int n = weft_param_count();
  const char** k = calloc((size_t)n, sizeof(*k));
  if (k == NULL) return;
  for (int i = 0; i < n; i++) k[i] = weft_param_at(i)->name;
  all_keys = k;
  nkeys = n;
}

WEFT_API(ncclResult_t, ncclParamGetAllParameterKeys, const char*** table, int* tableLen) {
  WEFT_ARG_CHECK(table != NULL && tableLen != NULL,
                 "ncclParamGetAllParameterKeys: table %p or tableLen %p is NULL", (void*)table,
                 (void*)tableLen);
  pthread_once(&keys_once, build_keys);
  if (all_keys == NULL) {
    WEFT_WARN("ncclParamGetAllParameterKeys: out of memory for the key table");
    return ncclSystemError;
  }
  *table = all_keys;
  *tableLen = nkeys;
  return ncclSuccess;
}

/* The text build/bin/weft-info prints: every parameter, its value, source and help, on stdout. */
WEFT_API(void, ncclParamDumpAll, void) {
  weft_param_dump(stdout);
  fflush(stdout);
}
