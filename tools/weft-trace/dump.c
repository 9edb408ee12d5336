/* Loading one dump: parse the JSON, then check every field weft-trace uses, so a damaged or
 * foreign file is an error naming the file and the field, never a wrong verdict. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"
#include "json.h"

#define MAX_FILE (256u << 20)

struct ctx {
  const char* path;
  char* err;
  size_t err_size;
  int failed;
};

static void bad(struct ctx* c, const char* where, const char* what) {
  if (c->failed) return;
  c->failed = 1;
  snprintf(c->err, c->err_size, "%s: %s %s", c->path, where, what);
}

static uint64_t get_u64(struct ctx* c, const struct json* o, const char* key) {
  const struct json* j = json_get(o, key);
  if (j == NULL || j->type != JSON_NUM || !j->is_int) {
    bad(c, key, j == NULL ? "is missing" : "is not a non-negative integer");
    return 0;
  }
  return j->u64;
}

static int get_int(struct ctx* c, const struct json* o, const char* key) {
  const struct json* j = json_get(o, key);
  if (j == NULL || j->type != JSON_NUM || j->num != (double)(int)j->num) {
    bad(c, key, j == NULL ? "is missing" : "is not an integer");
    return 0;
  }
  return (int)j->num;
}

static void get_str(struct ctx* c, const struct json* o, const char* key, char* out, size_t size) {
  const struct json* j = json_get(o, key);
  out[0] = 0;
  if (j == NULL || j->type != JSON_STR) {
    bad(c, key, j == NULL ? "is missing" : "is not a string");
    return;
  }
  snprintf(out, size, "%s", j->str);
}

static const struct json* get_arr(struct ctx* c, const struct json* o, const char* key, int* n) {
  const struct json* j = json_get(o, key);
  *n = 0;
  if (j == NULL || j->type != JSON_ARR) {
    bad(c, key, j == NULL ? "is missing" : "is not an array");
    return NULL;
  }
  for (const struct json* k = j->kids; k; k = k->next) ++*n;
  return j;
}

static void load_op(struct ctx* c, const struct json* o, struct trace_op* op) {
  if (o->type != JSON_OBJ) return bad(c, "ops", "holds a non-object");
  op->seq = get_u64(c, o, "seq");
  op->coll_no = get_u64(c, o, "coll_no");
  op->count = get_u64(c, o, "count");
  get_str(c, o, "op", op->op, sizeof(op->op));
  get_str(c, o, "dtype", op->dtype, sizeof(op->dtype));
  get_str(c, o, "redop", op->redop, sizeof(op->redop));
  get_str(c, o, "algo", op->algo, sizeof(op->algo));
  get_str(c, o, "proto", op->proto, sizeof(op->proto));
  get_str(c, o, "state", op->state, sizeof(op->state));
  op->root = get_int(c, o, "root");
  op->channels = get_int(c, o, "channels");
  op->result = get_int(c, o, "result");
  op->enqueued = get_u64(c, o, "enqueued_ns");
  op->started = get_u64(c, o, "started_ns");
  op->finished = get_u64(c, o, "finished_ns");
}

static void load_inflight(struct ctx* c, const struct json* root, struct trace_rank* r) {
  const struct json* f = json_get(root, "in_flight");
  if (f == NULL) return bad(c, "in_flight", "is missing");
  if (f->type == JSON_NULL) return;
  r->has_inflight = 1;
  r->inflight_seq = get_u64(c, f, "seq");
  int n;
  const struct json* chans = get_arr(c, f, "channels", &n);
  int i = 0;
  for (const struct json* k = chans ? chans->kids : NULL; k && i < TRACE_CHANNELS; k = k->next, i++) {
    struct trace_chan* ch = &r->chans[i];
    ch->channel = get_int(c, k, "channel");
    ch->steps = get_u64(c, k, "steps");
    const struct json* w = json_get(k, "waiting");
    if (w == NULL || w->type != JSON_BOOL) bad(c, "waiting", "is not true or false");
    ch->waiting = w ? w->boolean : 0;
    ch->peer = get_int(c, k, "peer");
    ch->since = get_u64(c, k, "since_ns");
    ch->peer_steps = get_u64(c, k, "peer_steps");
    get_str(c, k, "what", ch->what, sizeof(ch->what));
  }
}

static void load_peers(struct ctx* c, const struct json* root, struct trace_rank* r) {
  int n;
  const struct json* peers = get_arr(c, root, "peers", &n);
  if (c->failed) return;
  if (n != r->nranks) return bad(c, "peers", "does not list nranks ranks");
  r->peers = calloc((size_t)n, sizeof(*r->peers));
  if (r->peers == NULL) return bad(c, "peers", "do not fit in memory");
  int i = 0;
  for (const struct json* k = peers->kids; k; k = k->next, i++) {
    get_str(c, k, "host", r->peers[i].host, sizeof(r->peers[i].host));
    get_str(c, k, "host_id", r->peers[i].host_id, sizeof(r->peers[i].host_id));
    r->peers[i].pid = get_int(c, k, "pid");
  }
}

static void load_root(struct ctx* c, const struct json* root, struct trace_rank* r) {
  if (root->type != JSON_OBJ) return bad(c, "the file", "is not a JSON object");
  if (get_int(c, root, "weft_trace") != 1) return bad(c, "weft_trace", "is not 1 (not a Weft trace dump?)");
  get_str(c, root, "comm_hash", r->comm_hash, sizeof(r->comm_hash));
  r->rank = get_int(c, root, "rank");
  r->nranks = get_int(c, root, "nranks");
  if (!c->failed && (r->nranks < 1 || r->rank < 0 || r->rank >= r->nranks))
    return bad(c, "rank", "is out of range");
  get_str(c, root, "host", r->host, sizeof(r->host));
  r->pid = get_int(c, root, "pid");
  get_str(c, root, "backend", r->backend, sizeof(r->backend));
  get_str(c, root, "reason", r->reason, sizeof(r->reason));
  r->async_error = get_int(c, root, "async_error");
  r->time_ns = get_u64(c, root, "time_ns");
  const struct json* cause = json_get(root, "cause");
  r->cause_rank = -1;
  if (cause == NULL)
    bad(c, "cause", "is missing");
  else if (cause->type != JSON_NULL)
    r->cause_rank = get_int(c, cause, "rank");
  /* "kind" came later: a dump without it names a lost rank. */
  const struct json* kind = cause != NULL && cause->type == JSON_OBJ ? json_get(cause, "kind") : NULL;
  r->cause_left = kind != NULL && kind->type == JSON_STR && strcmp(kind->str, "left") == 0;
  load_peers(c, root, r);
  int n;
  const struct json* ops = get_arr(c, root, "ops", &n);
  if (c->failed) return;
  r->ops = calloc(n ? (size_t)n : 1, sizeof(*r->ops));
  if (r->ops == NULL) return bad(c, "ops", "do not fit in memory");
  for (const struct json* k = ops->kids; k; k = k->next) load_op(c, k, &r->ops[r->nops++]);
  load_inflight(c, root, r);
}

static char* read_all(struct ctx* c) {
  FILE* f = fopen(c->path, "rb");
  if (f == NULL) {
    snprintf(c->err, c->err_size, "%s: cannot open: %s", c->path, strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  char* buf = malloc(cap + 1);
  while (buf) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    char* bigger = cap >= MAX_FILE ? NULL : realloc(buf, cap * 2 + 1);
    if (bigger == NULL) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = bigger, cap *= 2;
  }
  int err = ferror(f);
  fclose(f);
  if (buf == NULL || err) {
    snprintf(c->err, c->err_size, "%s: cannot read it (or over %u MiB)", c->path, MAX_FILE >> 20);
    free(buf);
    return NULL;
  }
  buf[n] = 0;
  if (strlen(buf) != n) {
    snprintf(c->err, c->err_size, "%s: holds a NUL byte: not a trace dump", c->path);
    free(buf);
    return NULL;
  }
  return buf;
}

int trace_load(const char* path, struct trace_rank* r, char* err, size_t err_size) {
  struct ctx c = {path, err, err_size, 0};
  memset(r, 0, sizeof(*r));
  snprintf(r->path, sizeof(r->path), "%s", path);
  char* text = read_all(&c);
  if (text == NULL) return -1;
  char jerr[200];
  struct json* root = json_parse(text, jerr, sizeof(jerr));
  free(text);
  if (root == NULL) {
    snprintf(err, err_size, "%s: not valid JSON: %s", path, jerr);
    return -1;
  }
  load_root(&c, root, r);
  json_free(root);
  if (c.failed) {
    trace_rank_free(r);
    return -1;
  }
  return 0;
}

void trace_rank_free(struct trace_rank* r) {
  free(r->peers);
  free(r->ops);
  r->peers = NULL;
  r->ops = NULL;
}
