/* One rank's flight recorder dump as weft-trace reads it (the writer: src/collectives/trace_dump.c),
 * and the verdict over all ranks of a communicator (analyze.c). */
#ifndef WEFT_TRACE_DUMP_H
#define WEFT_TRACE_DUMP_H

#include <stddef.h>
#include <stdint.h>

#define TRACE_CHANNELS 32 /* CUDA kernels report every channel (WEFT_PROGRESS_SLOTS) */

struct trace_op {
  uint64_t seq, coll_no, count;
  char op[24], dtype[16], redop[16], algo[12], proto[12], state[12];
  int root, channels, result;
  uint64_t enqueued, started, finished;
};

struct trace_chan {
  int channel, peer, waiting;
  uint64_t steps, since, peer_steps;
  char what[96];
};

struct trace_peer {
  char host[64];
  char host_id[24]; /* hash of the host identity: tells apart hosts that share a name (WEFT_HOSTID) */
  int pid;
};

struct trace_rank {
  char path[512];
  char comm_hash[24];
  int rank, nranks, pid, async_error;
  uint64_t time_ns; /* when it was written (CLOCK_REALTIME) */
  char host[64], reason[16], backend[8];
  int cause_rank;           /* -1: none */
  int cause_left;           /* that rank destroyed its communicator ("kind": "left"), not lost */
  struct trace_peer* peers; /* [nranks] */
  struct trace_op* ops;     /* oldest first */
  int nops;
  int has_inflight;
  uint64_t inflight_seq;
  struct trace_chan chans[TRACE_CHANNELS];
};

/* Reads path into r; on error returns -1 with the reason (naming the file) in err. */
int trace_load(const char* path, struct trace_rank* r, char* err, size_t err_size);
void trace_rank_free(struct trace_rank* r);

/* What weft-trace concludes about one communicator. */
#define VERDICT_MAX_EVIDENCE 64
struct verdict {
  int nculprits;
  int* culprits;      /* ranks */
  char kind[24];      /* "missing", "mismatch", "not-entered", "stalled", "unknown", "none" */
  char summary[1024]; /* the text after "culprit: " */
  uint64_t op;        /* the collective number (coll_no) concerned; 0 when none */
  char* evidence[VERDICT_MAX_EVIDENCE];
  int nevidence;
};

/* ranks[0..n) are the dumps of one communicator (any order; missing ranks are absent). */
void trace_analyze(struct trace_rank* ranks, int n, struct verdict* v);
void verdict_free(struct verdict* v);

#endif
