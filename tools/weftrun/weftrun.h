/* weftrun: shared types of the job launcher (options, rank placement, rank state).
 * One process supervises all ranks; every module works on the single struct weftrun_job. */
#ifndef WEFTRUN_H
#define WEFTRUN_H

#include <stddef.h>
#include <sys/types.h>

#define WEFTRUN_USAGE_EXIT 2     /* bad command line, like most POSIX tools */
#define WEFTRUN_TIMEOUT_EXIT 124 /* same as coreutils timeout(1) */
#define WEFTRUN_TAG_LINE_BYTES 16384

enum weftrun_bind { WEFTRUN_BIND_NONE, WEFTRUN_BIND_NUMA, WEFTRUN_BIND_CORE };

struct weftrun_opts {
  int n_ranks;        /* 0 until given; -H alone defaults it to the slot total */
  const char* hosts;  /* -H value, NULL for a local job */
  double timeout_sec; /* 0: no limit */
  int tag_output;     /* prefix every output line with [rank] */
  enum weftrun_bind bind;
  char** argv; /* program and its arguments, NULL-terminated */
};

struct weftrun_host {
  char* name;
  int slots;
  int local;    /* started directly rather than through ssh */
  int n_placed; /* ranks placed here, i.e. LOCAL_NRANKS */
};

/* One line buffer per captured stream of a rank (--tag-output). */
struct weftrun_tagbuf {
  int fd;         /* read end of the rank's pipe, -1 once at EOF */
  int out_fd;     /* where tagged lines go: 1 or 2 */
  int mid_line;   /* an over-long line was flushed without its end */
  int out_broken; /* out_fd's reader has gone; output is dropped */
  size_t len;
  char* data;
};

struct weftrun_rank {
  int rank;
  int local_rank;
  struct weftrun_host* host;
  pid_t pid;                    /* also its process group id; 0 once reaped */
  struct weftrun_tagbuf out[2]; /* stdout, stderr */
};

struct weftrun_job {
  struct weftrun_opts opts;
  struct weftrun_host* hosts;
  int n_hosts;
  char* host_names; /* the -H list, split in place: the hosts' names point into it */
  struct weftrun_rank* ranks;
  char root_addr[64]; /* numeric address of the rendezvous root, no brackets */
  int root_port;
  int n_gpus;       /* GPUs seen on this host, 0 if none */
  double grace_sec; /* SIGTERM -> SIGKILL delay */
};

/* main.c */
void weftrun_die_usage(const char* fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void weftrun_die(const char* fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* plan.c: parse -H, place ranks on hosts, choose the rendezvous address and port.
 * Exits with a usage error on a bad host list. */
void weftrun_plan_create(struct weftrun_job* job);
void weftrun_plan_destroy(struct weftrun_job* job);

/* spawn.c: start one rank (local fork+exec or ssh); fills rank->pid and the tag pipes.
 * Returns -1 (after saying why) if the rank could not be started. */
int weftrun_spawn_rank(struct weftrun_job* job, struct weftrun_rank* rank);
int weftrun_spawn_count_gpus(void);

/* bind.c: --bind in the forked child of a local rank. */
void weftrun_bind_self(struct weftrun_job* job, struct weftrun_rank* rank);

/* supervise.c: run the job to the end; returns weftrun's exit status. */
void weftrun_supervise_init(void);
int weftrun_supervise_run(struct weftrun_job* job, int n_started);

/* tag.c: line-tagging of captured rank output. */
void weftrun_tag_init(struct weftrun_tagbuf* buf, int fd, int out_fd);
int weftrun_tag_read(struct weftrun_tagbuf* buf, int rank);   /* 0 at EOF (fd closed) */
void weftrun_tag_close(struct weftrun_tagbuf* buf, int rank); /* flushes a partial line */

/* secret.c: give the ranks a fresh WEFT_JOB_SECRET unless the user set one. 0 on success. */
int weftrun_secret_export(void);

#endif
