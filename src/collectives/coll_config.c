/* ncclCollConfig_t of the nccl*Config collectives: only the bytes the caller's size covers are
 * read, the magic and the values are checked, the algorithm selection goes to the one planner
 * (plan.c, and the CUDA backend's launch, through weft_call_opts), and what Weft does not act on
 * (nvlsCTAs, cgaClusterSize, CTAPolicy, vendor extensions) is accepted and logged. */
#include "collectives/coll_config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "collectives/context.h"
#include "collectives/engine.h"
#include "collectives/plan.h"
#include "collectives/tuned.h"
#include "util/check.h"
#include "util/log.h"

/* NCCL 2.30 introduced the struct with fields through userProfilerTag; launchCompletionEvent
 * came after. A caller built against that header passes the shorter struct. */
#define MIN_SIZE offsetof(ncclCollConfig_t, launchCompletionEvent)
#define EVENT_END (offsetof(ncclCollConfig_t, launchCompletionEvent) + sizeof(cudaEvent_t))
/* The extension list must not be circular; a walk this long means it is. */
#define MAX_EXT 1024

static const char* const algo_names[] = {"Tree",     "Ring", "CollNetDirect", "CollNetChain", "NVLS",
                                         "NVLSTree", "PAT"};
static const char* const proto_names[] = {"LL", "LL128", "Simple"};
#define NALGOS 7
#define NPROTOS 3
_Static_assert(WEFT_TUNED_ALGO_ALL == (1u << NALGOS) - 1 && WEFT_TUNED_PROTO_ALL == (1u << NPROTOS) - 1,
               "one name per mask bit");

/* The config as read: its algorithm selection parsed (masks with every bit set: no restriction). */
struct parsed {
  ncclCollConfig_t c;
  unsigned algos, protos;
};

static int name_index(const char* s, size_t n, const char* const* names, int count) {
  for (int i = 0; i < count; i++)
    if (strlen(names[i]) == n && strncasecmp(s, names[i], n) == 0) return i;
  return -1;
}

/* One list item: an algorithm or a protocol name, blanks around it already trimmed. */
static int parse_item(const char* s, size_t n, unsigned* a, unsigned* p, char* why, size_t why_size) {
  int i = name_index(s, n, algo_names, NALGOS);
  if (i >= 0) {
    *a |= 1u << i;
    return 0;
  }
  i = name_index(s, n, proto_names, NPROTOS);
  if (i >= 0) {
    *p |= 1u << i;
    return 0;
  }
  snprintf(why, why_size,
           "'%.*s' is neither an algorithm (Tree, Ring, CollNetDirect, CollNetChain, NVLS, "
           "NVLSTree, PAT) nor a protocol (LL, LL128, Simple)%s",
           (int)n, s,
           memchr(s, ':', n) || memchr(s, ';', n) ? "; per-collective lists (':', ';') are NCCL_ALGO's" : "");
  return -1;
}

int weft_coll_sel_parse(const char* text, unsigned* algos, unsigned* protos, char* why, size_t why_size) {
  unsigned a = 0, p = 0;
  *algos = WEFT_TUNED_ALGO_ALL;
  *protos = WEFT_TUNED_PROTO_ALL;
  if (text == NULL) return 0;
  while (*text == ' ' || *text == '\t') text++;
  int exclude = *text == '^';
  const char* s = text + exclude;
  while (*s) {
    const char* end = strchr(s, ',');
    size_t n = end ? (size_t)(end - s) : strlen(s);
    while (n && (*s == ' ' || *s == '\t')) s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    if (n && parse_item(s, n, &a, &p, why, why_size) != 0) return -1;
    if (end == NULL) break;
    s = end + 1;
  }
  if (exclude && a == 0 && p == 0) {
    snprintf(why, why_size, "'^' excludes nothing");
    return -1;
  }
  if (a) *algos = exclude ? WEFT_TUNED_ALGO_ALL & ~a : a;
  if (p) *protos = exclude ? WEFT_TUNED_PROTO_ALL & ~p : p;
  return 0;
}

static size_t mask_text(unsigned m, const char* const* names, int count, char* buf, size_t size) {
  size_t len = 0;
  buf[0] = 0;
  for (int i = 0; i < count && len < size; i++)
    if (m >> i & 1) len += (size_t)snprintf(buf + len, size - len, "%s%s", len ? "," : "", names[i]);
  if (len == 0) snprintf(buf, size, "none");
  return len;
}

/* sig: what shapes the plan, as parsed (not as resolved for one collective, so that calls of
 * different collectives with one config keep one signature): bit 63 set; algorithms in bits 0-6,
 * protocols 8-10, min channels 16-23, max 24-31. forceAlgSelection is left out: where the
 * selection can be met it changes nothing, and where it cannot, a forced call fails before it
 * queues anything. */
static uint64_t make_sig(const struct parsed* p, int min_ch, int max_ch) {
  if (p->algos == WEFT_TUNED_ALGO_ALL && p->protos == WEFT_TUNED_PROTO_ALL && min_ch == 0 && max_ch == 0)
    return 0;
  return 1ull << 63 | (uint64_t)p->algos | (uint64_t)p->protos << 8 | (uint64_t)(min_ch & 0xff) << 16 |
         (uint64_t)(max_ch & 0xff) << 24;
}

void weft_coll_sel_text(uint64_t sig, char* buf, size_t size) {
  if (sig == 0) {
    snprintf(buf, size, "automatic");
    return;
  }
  char a[96], p[32];
  mask_text((unsigned)(sig & 0x7f), algo_names, NALGOS, a, sizeof(a));
  mask_text((unsigned)(sig >> 8 & 0x7), proto_names, NPROTOS, p, sizeof(p));
  snprintf(buf, size, "algorithms %s, protocols %s, channels %d..%d (0: unset)", a, p,
           (int)(sig >> 16 & 0xff), (int)(sig >> 24 & 0xff));
}

/* Copy what the caller's size covers over the defaults: size first (the magic lies beyond the
 * smallest sizes), then the magic, as NCCL checks them. */
static ncclResult_t read_config(const ncclCollConfig_t* user, const char* name, ncclCollConfig_t* c) {
  ncclCollConfig_t init = NCCL_COLLCONFIG_INITIALIZER;
  *c = init;
  WEFT_ARG_CHECK(user->size >= MIN_SIZE,
                 "%s: config size %zu is smaller than the %zu bytes of the oldest ncclCollConfig_t; was it "
                 "initialized with NCCL_COLLCONFIG_INITIALIZER?",
                 name, user->size, (size_t)MIN_SIZE);
  WEFT_ARG_CHECK(
      user->magic == NCCL_API_MAGIC,
      "%s: config magic 0x%x (expected 0x%x); was it initialized with NCCL_COLLCONFIG_INITIALIZER?", name,
      user->magic, (unsigned)NCCL_API_MAGIC);
  memcpy(c, user, user->size < sizeof(*c) ? user->size : sizeof(*c));
  if (user->size < EVENT_END) c->launchCompletionEvent = NULL;
  return ncclSuccess;
}

/* Weft has no vendor options: each is named in the log and otherwise ignored. */
static ncclResult_t walk_ext(const ncclConfigExt_t* e, const char* name) {
  for (int n = 0; e != NULL; e = e->next, n++) {
    WEFT_ARG_CHECK(n < MAX_EXT, "%s: config ext holds more than %d options; is the list circular?", name,
                   MAX_EXT);
    WEFT_INFO(WEFT_COLL,
              "%s: config ext option (vendorId %d, optionId %d) ignored: Weft has no vendor options", name,
              e->key.vendorId, e->key.optionId);
  }
  return ncclSuccess;
}

/* What needs no communicator: the flag and policy ranges, the extensions, the selection text. A
 * selection Weft cannot read is an error when forced, and automatic otherwise. */
static ncclResult_t check_fields(const ncclCollConfig_t* user, const char* name, struct parsed* p) {
  WEFT_CHECK(read_config(user, name, &p->c));
  const ncclCollConfig_t* c = &p->c;
  WEFT_ARG_CHECK(c->forceAlgSelection == 0 || c->forceAlgSelection == 1,
                 "%s: config forceAlgSelection %d (must be 0 or 1)", name, c->forceAlgSelection);
  WEFT_ARG_CHECK(
      c->CTAPolicy == NCCL_CONFIG_UNDEF_INT || (c->CTAPolicy >= 0 && c->CTAPolicy <= 2),
      "%s: config CTAPolicy %d (must be NCCL_CTA_POLICY_DEFAULT, _EFFICIENCY or _ZERO, or undefined)", name,
      c->CTAPolicy);
  WEFT_CHECK(walk_ext(c->ext, name));
  char why[256];
  if (weft_coll_sel_parse(c->algSelection, &p->algos, &p->protos, why, sizeof(why)) == 0) return ncclSuccess;
  WEFT_ARG_CHECK(!c->forceAlgSelection, "%s: config algSelection \"%s\": %s", name, c->algSelection, why);
  WEFT_INFO(WEFT_COLL | WEFT_TUNING,
            "%s: config algSelection \"%s\" ignored (%s); forceAlgSelection 0: automatic", name,
            c->algSelection, why);
  return ncclSuccess;
}

/* A CTA bound of the call must lie within the communicator's (ncclConfig_t minCTAs..maxCTAs). */
static ncclResult_t check_ctas(const ncclCollConfig_t* c, const struct weft_comm_ctx* comm,
                               const char* name) {
  int lo = comm->config.minCTAs, hi = comm->config.maxCTAs;
  WEFT_ARG_CHECK(c->minCTAs == NCCL_CONFIG_UNDEF_INT || (c->minCTAs >= lo && c->minCTAs <= hi),
                 "%s: config minCTAs %d outside the communicator's %d..%d (comm %p rank %d)", name,
                 c->minCTAs, lo, hi, (void*)comm, comm->rank);
  WEFT_ARG_CHECK(c->maxCTAs == NCCL_CONFIG_UNDEF_INT || (c->maxCTAs >= lo && c->maxCTAs <= hi),
                 "%s: config maxCTAs %d outside the communicator's %d..%d (comm %p rank %d)", name,
                 c->maxCTAs, lo, hi, (void*)comm, comm->rank);
  WEFT_ARG_CHECK(
      c->minCTAs == NCCL_CONFIG_UNDEF_INT || c->maxCTAs == NCCL_CONFIG_UNDEF_INT || c->minCTAs <= c->maxCTAs,
      "%s: config minCTAs %d greater than maxCTAs %d (comm %p rank %d)", name, c->minCTAs, c->maxCTAs,
      (void*)comm, comm->rank);
  return ncclSuccess;
}

/* What the planner could run coll with here, for the WARN of a selection it cannot meet. */
static void possible_text(const struct weft_plan_params* pp, int coll, char* buf, size_t size) {
  unsigned a = 0, p = 0;
  for (int i = 0; i < NALGOS; i++)
    if (weft_plan_can_meet(pp, coll, 1u << i, WEFT_TUNED_PROTO_ALL)) a |= 1u << i;
  for (int i = 0; i < NPROTOS; i++)
    if (weft_plan_can_meet(pp, coll, WEFT_TUNED_ALGO_ALL, 1u << i)) p |= 1u << i;
  char at[96], ptx[32];
  mask_text(a, algo_names, NALGOS, at, sizeof(at));
  mask_text(p, proto_names, NPROTOS, ptx, sizeof(ptx));
  snprintf(buf, size, "algorithms %s, protocols %s", at, ptx);
}

/* The selection against what this comm's planner can run for coll (its NCCL_ALGO / NCCL_PROTO,
 * its tuning model, its backend). Deterministic from state every rank agreed on at init, so
 * ranks given the same config resolve it alike. */
static ncclResult_t resolve_selection(const struct parsed* p, const struct weft_call* call, int coll,
                                      struct weft_call_opts* o) {
  if (p->algos == WEFT_TUNED_ALGO_ALL && p->protos == WEFT_TUNED_PROTO_ALL) return ncclSuccess;
  const struct weft_plan_params* pp = weft_engine_plan_params(call->comm);
  if (pp != NULL && weft_plan_can_meet(pp, coll, p->algos, p->protos)) {
    o->algos = p->algos;
    o->protos = p->protos;
    return ncclSuccess;
  }
  char can[160] = "nothing to select: it runs as sends and receives";
  if (pp != NULL && coll != WEFT_COLL_SEND) possible_text(pp, coll, can, sizeof(can));
  WEFT_ARG_CHECK(!p->c.forceAlgSelection,
                 "%s: config algSelection \"%s\" cannot be met on this communicator (%s) (comm %p rank %d); "
                 "forceAlgSelection 0 falls back to automatic",
                 call->name, p->c.algSelection, can, (void*)call->comm, call->comm->rank);
  WEFT_INFO(WEFT_COLL | WEFT_TUNING, "%s: config algSelection \"%s\" cannot be met (%s); automatic",
            call->name, p->c.algSelection, can);
  return ncclSuccess;
}

static ncclResult_t resolve(const struct parsed* p, const struct weft_call* call, int coll,
                            struct weft_call_opts* o) {
  const ncclCollConfig_t* c = &p->c;
  memset(o, 0, sizeof(*o));
  WEFT_CHECK(check_ctas(c, call->comm, call->name));
  /* AlltoAll, Gather and Scatter run as sends and receives, whose channels the planner's bounds do
   * not shape (NCCL_MIN/MAX_P2P_NCHANNELS do): their bounds are checked, and no more. */
  if (coll != WEFT_COLL_SEND) {
    o->min_channels = c->minCTAs == NCCL_CONFIG_UNDEF_INT ? 0 : c->minCTAs;
    o->max_channels = c->maxCTAs == NCCL_CONFIG_UNDEF_INT ? 0 : c->maxCTAs;
  }
  WEFT_CHECK(resolve_selection(p, call, coll, o));
  o->sig = coll == WEFT_COLL_SEND ? 0 : make_sig(p, o->min_channels, o->max_channels);
  o->profiler_tag = c->userProfilerTag;
  /* Weft's executors have one way to run each call (no copy-engine or low-SM variants), so the
   * policy is recorded for the log, as the communicator's is. */
  o->cta_policy = c->CTAPolicy == NCCL_CONFIG_UNDEF_INT ? call->comm->config.CTAPolicy : c->CTAPolicy;
  /* Host backend: the call has completed when the group returns, so there is no launch to mark and
   * the event is left alone; the CUDA backend records it after its kernel launch. */
  o->completion_event = c->launchCompletionEvent;
  return ncclSuccess;
}

static void log_config(const struct weft_call* call, const struct parsed* p, const struct weft_call_opts* o) {
  if (!WEFT_LOG_ON(WEFT_LOG_INFO, WEFT_COLL)) return;
  char sel[192];
  weft_coll_sel_text(o->sig, sel, sizeof(sel));
  WEFT_INFO(WEFT_COLL,
            "%s: opCount %lx config: algSelection \"%s\" (%s), nvlsCTAs %d, cgaClusterSize %d, CTAPolicy %d, "
            "userProfilerTag 0x%llx, launchCompletionEvent %p",
            call->name, (unsigned long)call->comm->next_seq, p->c.algSelection ? p->c.algSelection : "", sel,
            p->c.nvlsCTAs, p->c.cgaClusterSize, o->cta_policy, (unsigned long long)o->profiler_tag,
            (void*)o->completion_event);
}

ncclResult_t weft_enqueue_config(const struct weft_call* call, int coll, const ncclCollConfig_t* config,
                                 struct weft_call_opts* opts) {
  struct parsed p;
  WEFT_CHECK(check_fields(config, call->name, &p));
  WEFT_CHECK(resolve(&p, call, coll, opts));
  log_config(call, &p, opts);
  return ncclSuccess;
}
