/* Pure checks of every bootstrap message that arrives off the wire, and the root's roster of
 * check-ins. The state machines (root.c, bootstrap.c, p2p.c) call them after the MAC checks out,
 * and tests/fuzz/fuzz_wire.c calls them with hostile input, so they must never trust a field. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/internal.h"

/* snprintf into why, which may be NULL (callers that only want the verdict). */
#define WHY(...) (why != NULL ? snprintf(why, len, __VA_ARGS__) : 0)

int weft_bs_checkin_valid(const struct weft_bs_checkin* m, uint64_t magic, char* why, size_t len) {
  if (m->magic != magic) return WHY("wrong magic"), 0;
  if (m->type != WEFT_SOCKET_BOOTSTRAP || (m->kind != WEFT_BS_CHECKIN && m->kind != WEFT_BS_ADDR))
    return WHY("not a bootstrap check-in"), 0;
  if (m->nranks < 1 || m->nranks > WEFT_BOOTSTRAP_MAX_RANKS || m->nroots < 1 || m->nroots > m->nranks ||
      m->iroot < 0 || m->iroot >= m->nroots || m->rank < 0 || m->rank >= m->nranks)
    return WHY("check-in fields out of range"), 0;
  if (!weft_socket_addr_valid(&m->listen))
    return WHY("listen address of family %d", m->listen.sa.sa_family), 0;
  return 1;
}

int weft_bs_roster_init(struct weft_bs_roster* r, const struct weft_bs_checkin* m) {
  memset(r, 0, sizeof(*r));
  r->nranks = m->nranks;
  r->nroots = m->nroots;
  r->iroot = m->iroot;
  weft_bs_block(r->nranks, r->nroots, r->iroot, &r->lo, &r->hi);
  r->extra = (r->lo == 0 && r->hi == r->nranks) ? -1 : r->hi % r->nranks;
  r->nneeded = r->hi - r->lo + (r->extra >= 0 ? 1 : 0);
  r->addrs = calloc(r->nneeded, sizeof(*r->addrs));
  r->have = calloc(r->nneeded, 1);
  if (r->addrs == NULL || r->have == NULL) {
    weft_bs_roster_fini(r);
    return 0;
  }
  return 1;
}

void weft_bs_roster_fini(struct weft_bs_roster* r) {
  free(r->addrs);
  free(r->have);
  memset(r, 0, sizeof(*r));
}

int weft_bs_roster_slot(const struct weft_bs_roster* r, int rank) {
  if (rank >= r->lo && rank < r->hi) return rank - r->lo;
  return rank == r->extra ? r->hi - r->lo : -1;
}

int weft_bs_roster_rank(const struct weft_bs_roster* r, int slot) {
  return slot < r->hi - r->lo ? r->lo + slot : r->extra;
}

int weft_bs_roster_admit(const struct weft_bs_roster* r, const struct weft_bs_checkin* m, int* slot,
                         char* why, size_t len) {
  *slot = -1;
  if (m->nranks != r->nranks) return WHY("it says nranks %d, earlier ranks said %d", m->nranks, r->nranks), 0;
  if (m->nroots != r->nroots || m->iroot != r->iroot)
    return WHY("it counts %d roots, earlier ranks %d", m->nroots, r->nroots), 0;
  int s = weft_bs_roster_slot(r, m->rank);
  int wants_reply = m->kind == WEFT_BS_CHECKIN;
  if (s < 0 || (wants_reply && m->rank == r->extra) || (!wants_reply && m->rank != r->extra))
    return WHY("rank %d does not belong to this root (kind %d)", m->rank, (int)m->kind), 0;
  if (r->have[s] == WEFT_BS_HAVE_PRESENT) return WHY("rank %d checked in twice", m->rank), 0;
  *slot = s;
  return 1;
}

void weft_bs_roster_missing(const struct weft_bs_roster* r, struct weft_bs_reply* reply) {
  memset(reply, 0, sizeof(*reply));
  reply->kind = WEFT_BS_REPLY_MISSING;
  reply->nneeded = r->nneeded;
  reply->gone = -1;
  for (int s = 0; s < r->nneeded; s++) {
    if (r->have[s] != WEFT_BS_HAVE_NEVER) continue;
    if (reply->nlisted < WEFT_BOOTSTRAP_MAX_LISTED)
      reply->missing[reply->nlisted++] = weft_bs_roster_rank(r, s);
    reply->count++;
  }
  for (int s = 0; s < r->nneeded; s++) {
    if (r->have[s] != WEFT_BS_HAVE_LEFT) continue;
    if (reply->nlisted + reply->nlisted_left < WEFT_BOOTSTRAP_MAX_LISTED)
      reply->missing[reply->nlisted + reply->nlisted_left++] = weft_bs_roster_rank(r, s);
    reply->nleft++;
  }
}

static int format_list(char* buf, size_t len, const int32_t* ranks, int n, int total) {
  int used = 0;
  for (int k = 0; k < n && used < (int)len - 16; k++)
    used += snprintf(buf + used, len - used, "%s%d", k ? "," : "", ranks[k]);
  if (total > n && used < (int)len - 4) used += snprintf(buf + used, len - used, ",...");
  return used;
}

/* Counts are clamped rather than trusted: a reply from a buggy root still prints. */
void weft_bs_format_missing(const struct weft_bs_reply* reply, char* buf, size_t len) {
  int nlisted = reply->nlisted < 0                           ? 0
                : reply->nlisted > WEFT_BOOTSTRAP_MAX_LISTED ? WEFT_BOOTSTRAP_MAX_LISTED
                                                             : reply->nlisted;
  int nleft = reply->nlisted_left < 0 ? 0 : reply->nlisted_left;
  if (nleft > WEFT_BOOTSTRAP_MAX_LISTED - nlisted) nleft = WEFT_BOOTSTRAP_MAX_LISTED - nlisted;
  int used = snprintf(buf, len, "%d of %d never checked in: missing ranks ", reply->count, reply->nneeded);
  if (used < (int)len) used += format_list(buf + used, len - used, reply->missing, nlisted, reply->count);
  if (reply->nleft > 0 && used < (int)len) {
    used += snprintf(buf + used, len - used, "; %d checked in and left: ranks ", reply->nleft);
    if (used < (int)len) format_list(buf + used, len - used, reply->missing + nlisted, nleft, reply->nleft);
  }
}

int weft_bs_reply_valid(const struct weft_bs_reply* r, int nranks, char* why, size_t len) {
  switch (r->kind) {
    case WEFT_BS_REPLY_NEXT:
      if (!weft_socket_addr_valid(&r->next))
        return WHY("successor address of family %d", r->next.sa.sa_family), 0;
      return 1;
    case WEFT_BS_REPLY_GONE:
      if (r->gone < 0 || r->gone >= nranks) return WHY("names rank %d of %d as gone", r->gone, nranks), 0;
      return 1;
    case WEFT_BS_REPLY_MISSING:
    case WEFT_BS_REPLY_REJECT:
      return 1;
    default:
      return WHY("unknown reply kind %u", r->kind), 0;
  }
}

int weft_bs_header_valid(const struct weft_bs_header* h, uint64_t magic, int rank, int nranks,
                         const uint64_t* recv_seq, char* why, size_t len) {
  if (h->magic != magic) return WHY("wrong magic"), 0;
  if (h->type != WEFT_SOCKET_BOOTSTRAP) return WHY("socket type %u", h->type), 0;
  if (h->src < 0 || h->src >= nranks || h->dst != rank)
    return WHY("from rank %d to rank %d in a job of %d", h->src, h->dst, nranks), 0;
  if (h->kind == WEFT_BS_RING)
    return h->size == 0 ? 1 : (WHY("ring opening with %llu bytes", (unsigned long long)h->size), 0);
  if (h->kind != WEFT_BS_P2P && h->kind != WEFT_BS_BARRIER && h->kind != WEFT_BS_SPLIT &&
      h->kind != WEFT_BS_GATHER && h->kind != WEFT_BS_FINGER && h->kind != WEFT_BS_NOTE)
    return WHY("unknown kind %u", h->kind), 0;
  if (h->size > WEFT_BOOTSTRAP_MAX_MSG) return WHY("%llu bytes", (unsigned long long)h->size), 0;
  if (h->seq <= recv_seq[h->src])
    return WHY("sequence %llu from rank %d already received", (unsigned long long)h->seq, h->src), 0;
  return 1;
}

int weft_bs_peers_valid(const struct weft_bs_peer* peers, int nranks, char* why, size_t len) {
  for (int r = 0; r < nranks; r++)
    if (!weft_socket_addr_valid(&peers[r].addr))
      return WHY("rank %d's address has family %d", r, peers[r].addr.sa.sa_family), 0;
  return 1;
}
