/* From every rank's dump of one communicator to the rank(s) that stopped it, in this order:
 *  1. a collective whose arguments differ across ranks (the ranks outside the majority);
 *  2. ranks that left no dump (process killed, host lost);
 *  3. ranks that never entered the first collective some other rank did not complete (or, when
 *     such a rank is stuck in a send/receive with a peer that went on, that peer);
 *  4. the rank that stopped progressing: the peer the longest-waiting rank waits for, provided
 *     that peer was not itself waiting by then (victims start waiting within moments of each
 *     other; the rank they wait for was busy, stopped, or started waiting much later). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"

#define MAX_RANKS 1024 /* compared for mismatches; larger jobs: the first ones */
#define MAX_GROUPS 16
#define WAIT_TOLERANCE_NS 100000000ull /* victims of one stall start waiting within this */

struct view {
  struct trace_rank* ranks;
  int n, nranks;
  struct trace_rank** by_rank; /* [nranks], NULL: no dump */
  struct verdict* v;
};

static void evidence(struct verdict* v, const char* fmt, ...) {
  if (v->nevidence >= VERDICT_MAX_EVIDENCE) return;
  char buf[640];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  v->evidence[v->nevidence] = strdup(buf);
  if (v->evidence[v->nevidence]) v->nevidence++;
}

static void add_culprit(struct verdict* v, int rank) {
  for (int i = 0; i < v->nculprits; i++)
    if (v->culprits[i] == rank) return;
  int* more = realloc(v->culprits, (size_t)(v->nculprits + 1) * sizeof(int));
  if (more == NULL) return;
  v->culprits = more;
  v->culprits[v->nculprits++] = rank;
}

/* "rank 2" or "ranks 1,3" */
static void rank_list(char* out, size_t size, const int* ranks, int n) {
  size_t len = (size_t)snprintf(out, size, "%s", n == 1 ? "rank " : "ranks ");
  for (int i = 0; i < n && len < size; i++)
    len += (size_t)snprintf(out + len, size - len, "%s%d", i ? "," : "", ranks[i]);
}

static const struct trace_op* find_coll(const struct trace_rank* r, uint64_t n) {
  for (int i = 0; i < r->nops; i++)
    if (r->ops[i].coll_no == n) return &r->ops[i];
  return NULL;
}
static const struct trace_op* find_seq(const struct trace_rank* r, uint64_t seq) {
  for (int i = 0; i < r->nops; i++)
    if (r->ops[i].seq == seq) return &r->ops[i];
  return NULL;
}
static uint64_t first_coll(const struct trace_rank* r) {
  uint64_t m = 0;
  for (int i = 0; i < r->nops; i++)
    if (r->ops[i].coll_no && (m == 0 || r->ops[i].coll_no < m)) m = r->ops[i].coll_no;
  return m;
}
static uint64_t last_coll(const struct trace_rank* r) {
  uint64_t m = 0;
  for (int i = 0; i < r->nops; i++)
    if (r->ops[i].coll_no > m) m = r->ops[i].coll_no;
  return m;
}
/* A CUDA rank's "launched" operation is one its kernel had not finished when the rank dumped. */
static int complete(const struct trace_op* op) { return strcmp(op->state, "done") == 0; }
/* The first collective of r that did not complete; 0 when all did. */
static uint64_t first_open_coll(const struct trace_rank* r) {
  uint64_t m = 0;
  for (int i = 0; i < r->nops; i++)
    if (r->ops[i].coll_no && !complete(&r->ops[i]) && (m == 0 || r->ops[i].coll_no < m))
      m = r->ops[i].coll_no;
  return m;
}

static void describe(char* out, size_t size, const struct trace_op* op) {
  int n = snprintf(out, size, "%s count %llu %s", op->op, (unsigned long long)op->count, op->dtype);
  if (strcmp(op->redop, "none") != 0) n += snprintf(out + n, size - (size_t)n, " %s", op->redop);
  if (op->root >= 0) snprintf(out + n, size - (size_t)n, " %s %d", op->coll_no ? "root" : "peer", op->root);
}

/* 1. The first collective every rank recorded whose description differs. */
static int find_mismatch(struct view* w) {
  uint64_t lo = 0, hi = UINT64_MAX;
  for (int i = 0; i < w->n; i++) {
    uint64_t f = first_coll(&w->ranks[i]), l = last_coll(&w->ranks[i]);
    if (f > lo) lo = f;
    if (l < hi) hi = l;
  }
  for (uint64_t k = lo ? lo : 1; k <= hi && hi != UINT64_MAX; k++) {
    char desc[MAX_GROUPS][128];
    int group[MAX_RANKS], count[MAX_GROUPS], ngroups = 0;
    for (int r = 0; r < w->nranks && r < MAX_RANKS; r++) {
      group[r] = -1;
      const struct trace_op* op = w->by_rank[r] ? find_coll(w->by_rank[r], k) : NULL;
      if (op == NULL) continue;
      char d[128];
      describe(d, sizeof(d), op);
      int g = 0;
      while (g < ngroups && strcmp(desc[g], d) != 0) g++;
      if (g == MAX_GROUPS)
        g = MAX_GROUPS - 1; /* so many variants: the last group holds the rest */
      else if (g == ngroups)
        snprintf(desc[ngroups], sizeof(desc[0]), "%s", d), count[ngroups++] = 0;
      group[r] = g, count[g]++;
    }
    if (ngroups < 2) continue;
    int best = 0, tie = 0;
    for (int g = 1; g < ngroups; g++)
      if (count[g] > count[best])
        best = g, tie = 0;
      else if (count[g] == count[best])
        tie = 1;
    for (int r = 0; r < w->nranks && r < MAX_RANKS; r++)
      if (group[r] >= 0 && (tie || group[r] != best)) add_culprit(w->v, r);
    for (int g = 0; g < ngroups; g++) {
      int members[MAX_RANKS], m = 0;
      for (int r = 0; r < w->nranks && r < MAX_RANKS; r++)
        if (group[r] == g) members[m++] = r;
      char who[256];
      rank_list(who, sizeof(who), members, m);
      evidence(w->v, "%s called operation %llu as %s", who, (unsigned long long)k, desc[g]);
    }
    char who[256];
    rank_list(who, sizeof(who), w->v->culprits, w->v->nculprits);
    snprintf(w->v->kind, sizeof(w->v->kind), "mismatch");
    w->v->op = k;
    if (tie)
      snprintf(w->v->summary, sizeof(w->v->summary),
               "%s entered different collectives at operation %llu and no majority says which is right", who,
               (unsigned long long)k);
    else
      snprintf(w->v->summary, sizeof(w->v->summary),
               "%s entered a different collective at operation %llu (%s), the others %s", who,
               (unsigned long long)k,
               w->v->nculprits == 1 ? desc[group[w->v->culprits[0]]] : "other arguments", desc[best]);
    return 1;
  }
  return 0;
}

/* The channel r waits on longest, or NULL. */
static const struct trace_chan* oldest_wait(const struct trace_rank* r) {
  const struct trace_chan* best = NULL;
  for (int c = 0; r->has_inflight && c < TRACE_CHANNELS; c++)
    if (r->chans[c].waiting && r->chans[c].peer >= 0 && (best == NULL || r->chans[c].since < best->since))
      best = &r->chans[c];
  return best;
}

/* How a dump names the rank it gave up on. */
static const char* cause_word(const struct trace_rank* d) {
  return d->cause_left ? "having destroyed its communicator" : "lost";
}

/* One line per rank: where it was when it dumped. */
static void rank_evidence(struct view* w) {
  uint64_t t0 = 0;
  for (int i = 0; i < w->n; i++) {
    const struct trace_chan* c = oldest_wait(&w->ranks[i]);
    if (c && (t0 == 0 || c->since < t0)) t0 = c->since;
  }
  for (int r = 0; r < w->nranks; r++) {
    const struct trace_rank* d = w->by_rank[r];
    if (d == NULL) {
      evidence(w->v, "rank %d: no dump", r);
      continue;
    }
    char where[200] = "no operation in flight";
    const struct trace_op* op = d->has_inflight ? find_seq(d, d->inflight_seq) : NULL;
    if (op == NULL && d->nops) op = &d->ops[d->nops - 1];
    if (op) {
      char desc[128];
      describe(desc, sizeof(desc), op);
      snprintf(where, sizeof(where), "%s %llu (%s) %s", op->coll_no ? "operation" : "send/recv seq",
               (unsigned long long)(op->coll_no ? op->coll_no : op->seq), desc, op->state);
    }
    const struct trace_chan* c = oldest_wait(d);
    char wait[240] = "";
    if (c)
      snprintf(wait, sizeof(wait), ", waiting for rank %d on channel %d (%s) since +%.1f ms, %llu steps in",
               c->peer, c->channel, c->what, (double)(c->since - t0) / 1e6, (unsigned long long)c->steps);
    char cause[64] = "";
    if (d->cause_rank >= 0)
      snprintf(cause, sizeof(cause), "; it names rank %d as %s", d->cause_rank, cause_word(d));
    evidence(w->v, "rank %d (host %s, pid %d, dump on %s): %s%s%s", r, d->host, d->pid, d->reason, where,
             wait, cause);
  }
}

/* Whether some rank's dump names rank r as the one that left. */
static int reported_left(const struct view* w, int r) {
  for (int i = 0; i < w->n; i++)
    if (w->ranks[i].cause_rank == r && w->ranks[i].cause_left) return 1;
  return 0;
}

/* 2. */
static int find_missing(struct view* w) {
  int missing[256], m = 0;
  for (int r = 0; r < w->nranks && m < 256; r++)
    if (w->by_rank[r] == NULL) missing[m++] = r, add_culprit(w->v, r);
  if (m == 0) return 0;
  const struct trace_rank* any = &w->ranks[0];
  char who[256], hosts[256] = "";
  rank_list(who, sizeof(who), missing, m);
  size_t len = 0;
  for (int i = 0; i < m && len < sizeof(hosts); i++) {
    const struct trace_peer* p = &any->peers[missing[i]];
    len += (size_t)snprintf(hosts + len, sizeof(hosts) - len, "%s%s pid %d", i ? ", " : "", p->host, p->pid);
  }
  /* A host is lost when no rank on it left a dump while ranks elsewhere did. */
  const char* id = any->peers[missing[0]].host_id;
  int whole_host = strcmp(any->peers[any->rank].host_id, id) != 0;
  for (int r = 0; r < w->nranks; r++)
    if (strcmp(any->peers[r].host_id, id) == 0 && w->by_rank[r] != NULL) whole_host = 0;
  for (int i = 0; i < w->n; i++) {
    uint64_t o = first_open_coll(&w->ranks[i]);
    if (o && (w->v->op == 0 || o < w->v->op)) w->v->op = o;
  }
  char during[64] = "";
  if (w->v->op)
    snprintf(during, sizeof(during), " (the others stopped in operation %llu)", (unsigned long long)w->v->op);
  snprintf(w->v->kind, sizeof(w->v->kind), "missing");
  const char* why = whole_host
                        ? (m == 1 ? "its host was lost (no rank of that host left a dump)"
                                  : "their host was lost (no rank of that host left a dump)")
                        : (m == 1 ? "its process died or was killed" : "their processes died or were killed");
  /* A healthy rank that destroyed its communicator leaves no dump either: the others say so. */
  if (m == 1 && reported_left(w, missing[0]))
    why = "it destroyed its communicator while the others still waited for it (a call it never made)";
  snprintf(w->v->summary, sizeof(w->v->summary), "%s (%s) left no dump%s: %s", who, hosts, during, why);
  for (int i = 0; i < w->n; i++)
    if (w->ranks[i].cause_rank >= 0) {
      evidence(w->v, "rank %d reports rank %d as %s", w->ranks[i].rank, w->ranks[i].cause_rank,
               cause_word(&w->ranks[i]));
    }
  return 1;
}

/* 3a. A rank kept out of collective `open` by a send or receive whose peer went on to `open`:
 * that peer left its side of the pair out (or posted a different one). */
static int find_unmatched_p2p(struct view* w, const int* behind, int m, uint64_t open) {
  for (int i = 0; i < m; i++) {
    const struct trace_rank* r = w->by_rank[behind[i]];
    const struct trace_op* op = r->has_inflight ? find_seq(r, r->inflight_seq) : NULL;
    const struct trace_chan* c = oldest_wait(r);
    if (op == NULL || op->coll_no != 0 || c == NULL || c->peer >= w->nranks) continue;
    const struct trace_rank* p = w->by_rank[c->peer];
    if (p == NULL || last_coll(p) < open) continue;
    add_culprit(w->v, c->peer);
    char desc[128];
    describe(desc, sizeof(desc), op);
    snprintf(w->v->kind, sizeof(w->v->kind), "p2p-unmatched");
    w->v->op = open;
    snprintf(w->v->summary, sizeof(w->v->summary),
             "rank %d did not match the send/recv rank %d waits in (seq %llu, %s): rank %d went on to "
             "operation %llu, rank %d never got there",
             c->peer, r->rank, (unsigned long long)op->seq, desc, c->peer, (unsigned long long)open, r->rank);
    return 1;
  }
  return 0;
}

/* 3. */
static int find_not_entered(struct view* w, uint64_t* open_out) {
  uint64_t open = 0, top = 0;
  for (int i = 0; i < w->n; i++) {
    uint64_t o = first_open_coll(&w->ranks[i]), l = last_coll(&w->ranks[i]);
    if (o && (open == 0 || o < open)) open = o;
    if (l > top) top = l;
  }
  if (open == 0) open = top; /* all complete: a rank behind the others still did not enter */
  *open_out = open;
  int who[256], m = 0, in[256], k = 0;
  for (int i = 0; i < w->n; i++) {
    if (last_coll(&w->ranks[i]) < open && m < 256)
      who[m++] = w->ranks[i].rank;
    else if (k < 256)
      in[k++] = w->ranks[i].rank;
  }
  if (m == 0 || open == 0) return 0;
  if (find_unmatched_p2p(w, who, m, open)) return 1;
  for (int i = 0; i < m; i++) add_culprit(w->v, who[i]);
  char a[256], b[256], desc[128] = "?";
  rank_list(a, sizeof(a), who, m);
  rank_list(b, sizeof(b), in, k);
  for (int i = 0; i < w->n; i++) {
    const struct trace_op* op = find_coll(&w->ranks[i], open);
    if (op) {
      describe(desc, sizeof(desc), op);
      break;
    }
  }
  snprintf(w->v->kind, sizeof(w->v->kind), "not-entered");
  w->v->op = open;
  snprintf(w->v->summary, sizeof(w->v->summary), "%s did not enter operation %llu (%s) that %s entered", a,
           (unsigned long long)open, desc, b);
  return 1;
}

/* 4. Edges "r waits for p since t": the oldest one whose p was not waiting by t + tolerance. */
static int find_stalled(struct view* w) {
  int best_r = -1, best_p = -1;
  uint64_t best_t = 0;
  for (int i = 0; i < w->n; i++) {
    const struct trace_rank* r = &w->ranks[i];
    const struct trace_chan* c = oldest_wait(r);
    if (c == NULL || c->peer >= w->nranks || w->by_rank[c->peer] == NULL) continue;
    const struct trace_chan* pc = oldest_wait(w->by_rank[c->peer]);
    if (pc != NULL && pc->since <= c->since + WAIT_TOLERANCE_NS) continue; /* a victim itself */
    if (best_r < 0 || c->since < best_t) best_r = r->rank, best_p = c->peer, best_t = c->since;
  }
  if (best_p < 0) return 0;
  add_culprit(w->v, best_p);
  const struct trace_rank* p = w->by_rank[best_p];
  const struct trace_chan* pc = oldest_wait(p);
  const struct trace_op* op = p->has_inflight ? find_seq(p, p->inflight_seq) : NULL;
  snprintf(w->v->kind, sizeof(w->v->kind), "stalled");
  w->v->op = op ? op->coll_no : 0;
  char state[160];
  if (pc)
    snprintf(state, sizeof(state), "only started waiting (for rank %d) %.3f s later", pc->peer,
             (double)(pc->since - best_t) / 1e9);
  else
    snprintf(state, sizeof(state), "was not waiting for any peer");
  snprintf(w->v->summary, sizeof(w->v->summary),
           "rank %d stopped progressing in %s %llu: rank %d waits for it, and it %s", best_p,
           op && op->coll_no ? "operation" : "send/recv seq",
           (unsigned long long)(op ? (op->coll_no ? op->coll_no : op->seq) : 0), best_r, state);
  return 1;
}

void trace_analyze(struct trace_rank* ranks, int n, struct verdict* v) {
  memset(v, 0, sizeof(*v));
  struct view w = {ranks, n, ranks[0].nranks, NULL, v};
  w.by_rank = calloc((size_t)w.nranks, sizeof(*w.by_rank));
  if (w.by_rank == NULL) return;
  for (int i = 0; i < n; i++)
    if (ranks[i].rank < w.nranks) w.by_rank[ranks[i].rank] = &ranks[i];
  uint64_t open = 0;
  int found = find_mismatch(&w) || find_missing(&w) || find_not_entered(&w, &open) || find_stalled(&w);
  if (!found) {
    int failed = 0;
    for (int i = 0; i < n; i++) failed |= ranks[i].has_inflight || ranks[i].async_error != 0;
    snprintf(v->kind, sizeof(v->kind), failed ? "unknown" : "none");
    snprintf(v->summary, sizeof(v->summary), "%s",
             failed ? "none found: ranks failed or wait, but every rank they wait for waits as well"
                    : "none: every rank completed every recorded operation");
  }
  rank_evidence(&w);
  free(w.by_rank);
}

void verdict_free(struct verdict* v) {
  free(v->culprits);
  for (int i = 0; i < v->nevidence; i++) free(v->evidence[i]);
  memset(v, 0, sizeof(*v));
}
