/* weftrun: where ranks run. Parses the -H host list, assigns ranks to hosts by slots and
 * picks the rendezvous address (the first host) and a free port for NCCL_COMM_ID. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* for the Linux extras: CPU affinity, parent-death signal */
#endif
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "weftrun.h"

static int host_is_local(const char* name) {
  char self[256];
  if (!strcmp(name, "localhost") || !strcmp(name, "127.0.0.1")) return 1;
  if (gethostname(self, sizeof(self)) != 0) return 0;
  self[sizeof(self) - 1] = '\0';
  if (!strcmp(name, self)) return 1;
  /* "node1" and "node1.cluster.example" name the same machine in host lists. */
  size_t short_len = strcspn(self, ".");
  return strlen(name) == short_len && !strncmp(name, self, short_len);
}

static void parse_host(struct weftrun_host* h, char* item) {
  char* colon = strrchr(item, ':');
  h->slots = 1;
  if (colon) {
    char* end;
    long slots = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end || slots < 1 || slots > 1000000)
      weftrun_die_usage("bad slot count in host '%s' (want name:slots, slots >= 1)", item);
    h->slots = (int)slots;
    *colon = '\0';
  }
  if (!*item) weftrun_die_usage("empty host name in -H list");
  h->name = item;
  h->local = host_is_local(item);
}

static void parse_hosts(struct weftrun_job* job) {
  const char* list = job->opts.hosts ? job->opts.hosts : "localhost:1000000";
  char* copy = strdup(list);
  job->host_names = copy;
  int n = 1;
  for (const char* p = list; *p; p++) n += *p == ',';
  job->hosts = calloc(n, sizeof(*job->hosts));
  if (!copy || !job->hosts) weftrun_die("out of memory");
  char* save = NULL;
  for (char* item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save))
    parse_host(&job->hosts[job->n_hosts++], item);
  if (job->n_hosts == 0) weftrun_die_usage("empty -H host list");
}

/* Ranks fill hosts in list order. A host named twice, or two names of this machine,
 * share local rank numbering so LOCAL_RANK stays unique per machine. */
static struct weftrun_host* same_machine(struct weftrun_job* job, struct weftrun_host* h) {
  for (struct weftrun_host* o = job->hosts; o < h; o++)
    if ((o->local && h->local) || !strcmp(o->name, h->name)) return o;
  return h;
}

static void place_ranks(struct weftrun_job* job) {
  long total = 0;
  for (int i = 0; i < job->n_hosts; i++) total += job->hosts[i].slots;
  if (!job->opts.n_ranks) job->opts.n_ranks = total > 1000000 ? 1000000 : (int)total;
  if (job->opts.n_ranks > total)
    weftrun_die_usage("%d ranks requested but the hosts have only %ld slots", job->opts.n_ranks, total);
  job->ranks = calloc(job->opts.n_ranks, sizeof(*job->ranks));
  if (!job->ranks) weftrun_die("out of memory");
  int r = 0;
  for (int i = 0; i < job->n_hosts && r < job->opts.n_ranks; i++) {
    struct weftrun_host* m = same_machine(job, &job->hosts[i]);
    for (int s = 0; s < job->hosts[i].slots && r < job->opts.n_ranks; s++, r++) {
      job->ranks[r].rank = r;
      job->ranks[r].host = m;
      job->ranks[r].local_rank = m->n_placed++;
      job->ranks[r].out[0].fd = job->ranks[r].out[1].fd = -1;
    }
  }
}

/* Numeric form of the first address of name (IPv4 preferred, since that is what
 * every NCCL_COMM_ID parser accepts). Returns 0 on success. */
static int resolve(const char* name, struct sockaddr_storage* ss, socklen_t* len) {
  struct addrinfo hints, *res, *pick = NULL;
  memset(&hints, 0, sizeof(hints));
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(name, NULL, &hints, &res) != 0) return -1;
  for (struct addrinfo* a = res; a; a = a->ai_next)
    if (!pick || (a->ai_family == AF_INET && pick->ai_family != AF_INET)) pick = a;
  if (pick) {
    memcpy(ss, pick->ai_addr, pick->ai_addrlen);
    *len = pick->ai_addrlen;
  }
  freeaddrinfo(res);
  return pick ? 0 : -1;
}

/* The address other hosts can reach us on is the one our route to them leaves from;
 * a connected UDP socket reveals it without sending a packet. */
static int local_address_toward(const char* peer, struct sockaddr_storage* ss, socklen_t* len) {
  struct sockaddr_storage dst;
  socklen_t dst_len;
  if (resolve(peer, &dst, &dst_len) != 0) return -1;
  ((struct sockaddr_in*)&dst)->sin_port = htons(9); /* same offset for IPv6 */
  int fd = socket(dst.ss_family, SOCK_DGRAM, 0);
  if (fd < 0) return -1;
  *len = sizeof(*ss);
  int rc = connect(fd, (struct sockaddr*)&dst, dst_len) || getsockname(fd, (struct sockaddr*)ss, len);
  close(fd);
  return rc ? -1 : 0;
}

/* Binding port 0 lets the kernel choose a port that is free right now; the short window
 * until the root rank binds it is the accepted price of not running a daemon. */
static int free_port(const struct sockaddr_storage* addr, socklen_t len) {
  struct sockaddr_storage ss = *addr;
  ((struct sockaddr_in*)&ss)->sin_port = 0;
  int fd = socket(ss.ss_family, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  int port = -1;
  if (bind(fd, (struct sockaddr*)&ss, len) == 0 && getsockname(fd, (struct sockaddr*)&ss, &len) == 0)
    port = ntohs(((struct sockaddr_in*)&ss)->sin_port);
  close(fd);
  return port;
}

static void set_root_addr(struct weftrun_job* job, const struct sockaddr_storage* ss) {
  const void* raw = ss->ss_family == AF_INET6 ? (const void*)&((struct sockaddr_in6*)ss)->sin6_addr
                                              : (const void*)&((struct sockaddr_in*)ss)->sin_addr;
  if (!inet_ntop(ss->ss_family, raw, job->root_addr, sizeof(job->root_addr)))
    weftrun_die("cannot format the root address");
}

static struct weftrun_host* first_remote(struct weftrun_job* job) {
  for (int r = 0; r < job->opts.n_ranks; r++)
    if (!job->ranks[r].host->local) return job->ranks[r].host;
  return NULL;
}

static void choose_root(struct weftrun_job* job) {
  struct weftrun_host *root = job->ranks[0].host, *remote = first_remote(job);
  struct sockaddr_storage ss;
  socklen_t len;
  char self[256] = "localhost";
  memset(&ss, 0, sizeof(ss));
  if (!remote) {
    struct sockaddr_in* in = (struct sockaddr_in*)&ss;
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof(*in);
  } else if (root->local) {
    gethostname(self, sizeof(self) - 1);
    if (local_address_toward(remote->name, &ss, &len) != 0 && resolve(self, &ss, &len) != 0)
      weftrun_die("cannot find an address of this host that '%s' can reach", remote->name);
  } else if (resolve(root->name, &ss, &len) != 0) {
    weftrun_die("cannot resolve host '%s'", root->name);
  }
  set_root_addr(job, &ss);
  if (root->local || !remote) {
    job->root_port = free_port(&ss, len);
    if (job->root_port < 0) weftrun_die("cannot find a free TCP port on %s", job->root_addr);
  } else {
    /* No way to probe a remote host's ports from here: pick one at random from a range
     * outside the usual ephemeral ports, so collisions are unlikely. */
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    job->root_port = 20000 + rand() % 12000;
  }
}

void weftrun_plan_create(struct weftrun_job* job) {
  parse_hosts(job);
  place_ranks(job);
  choose_root(job);
}

void weftrun_plan_destroy(struct weftrun_job* job) {
  free(job->ranks);
  free(job->hosts);
  free(job->host_names);
  job->ranks = NULL;
  job->hosts = NULL;
  job->host_names = NULL;
}
