/* Connector layout shared by every executor (host threads, CUDA kernels) and transport: one
 * direction of one channel between two ranks, a FIFO of WEFT_NSTEPS slots in memory the
 * receiver owns, with monotonically increasing 64-bit step counters on separate lines. */
#ifndef WEFT_TRANSPORT_CONNECTOR_H
#define WEFT_TRANSPORT_CONNECTOR_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#define WEFT_NSTEPS 8

/* Why a rank gave up: the rank it lost first, or the rank that found a call mismatched, and that
 * rank's host label. A communicator keeps one, and publishes it in its shared connector pages and
 * in network notices when it gives up, so that ranks further away name the same rank (and give up
 * at once) instead of naming the neighbour that gave up, or waiting for it. */
/* LEFT: the rank destroyed or aborted its communicator while healthy (host executor): it will send
 * or take nothing more, so a peer still waiting for it gives up (collectives/host/wait.c). */
enum weft_cause_kind { WEFT_CAUSE_LOST = 0, WEFT_CAUSE_MISMATCH = 1, WEFT_CAUSE_LEFT = 2 };
struct weft_cause {
  uint32_t state; /* 0 empty, 1 being written, 2 set (kind, rank, host and what readable) */
  uint32_t kind;  /* enum weft_cause_kind */
  int32_t rank;
  /* CUDA kernels' marks (collectives/cuda/prims_dev.cuh): 1 + the low 16 bits of the number of
   * the collective they gave up in; 0: not said (any call heeds it). */
  uint32_t call;
  char host[120];
  char what[160]; /* a mismatch: how the calls differ, when the finder could tell; else "" */
};
/* Record kind/rank/host/what (NULL: none) in c unless it already holds a cause; returns whether
 * it was recorded. */
int weft_cause_set_kind(struct weft_cause* c, int kind, int rank, const char* host, const char* what);
/* The same for a lost rank. */
int weft_cause_set(struct weft_cause* c, int rank, const char* host);
/* Copy c into out when it holds a cause; returns whether it did. */
int weft_cause_get(const struct weft_cause* c, struct weft_cause* out);
/* Write why c's holder gave up ("mismatched collective (...), found by rank R (host H)" or "rank R
 * (host H) was lost") into buf; returns 0 (and buf "") when c holds no cause. */
int weft_cause_describe(const struct weft_cause* c, char* buf, size_t size);
#define WEFT_CTRL_BYTES 4096 /* the control page before the buffers */

/* tail: steps the sender has produced (written by the sender). head: steps the receiver has
 * consumed (written by the receiver). *_waiting: set by a side about to sleep on that counter
 * so the writer knows to wake it (host futex doorbell). The LL protocol does not need tail for
 * data; the host sender still bumps it as a doorbell for a sleeping receiver. */
struct weft_conn_ctrl {
  uint64_t tail;
  uint32_t tail_waiting;
  uint32_t pad_tag;
  /* Host senders: the call each step belongs to (the collective's sequence number in the high
   * half, a hash of its fingerprint in the low one; 0: not checked), written before the step is
   * published, on the line the receiver reads for tail anyway. */
  uint64_t step_tag[WEFT_NSTEPS];
  char pad0[128 - 16 - 8 * WEFT_NSTEPS];
  uint64_t head;
  uint32_t head_waiting;
  uint32_t pad_wait;
  /* CUDA receivers: the step tag of the call a receive that has waited a while is in (0: none),
   * for the sender to compare (collectives/cuda/prims_dev.cuh), on the line it reads anyway. On a
   * network connector the proxy reads it (any value but 0: the receiver waits), and a wait outside
   * a checked collective (send/recv) says WEFT_WAIT_TAG_UNTAGGED. */
  uint64_t wait_tag;
  char pad1[128 - 24];
  uint32_t refs; /* sides still using memory shared within one process */
  /* What each step carries, written by the sender before it publishes tail, so a proxy knows
   * what to forward: payload bytes, WEFT_STEP_LL for LL lines; 0 = the whole Simple slot. */
  uint32_t step_info[WEFT_NSTEPS];
  char pad2[128 - 4 - 4 * WEFT_NSTEPS];
  /* Network senders only (the proxy is in the sender's process): where a Simple step's payload
   * is when it was left in the user's buffer instead of copied into the slot; 0: the slot. */
  uint64_t step_ref[WEFT_NSTEPS];
  /* Why the sender [0] or the receiver [1] gave up, for the other side to name (shared memory). */
  struct weft_cause cause[2];
};
#define WEFT_WAIT_TAG_UNTAGGED 1ull
#define WEFT_STEP_LL 0x80000000u
#define WEFT_STEP_BYTES 0x7fffffffu

/* An LL line: two 8-byte words, each 4 data bytes and a 4-byte flag (step+1), so a reader that
 * sees a word's flag also sees that word's data, with no fence and no tail. */
struct weft_ll_line {
  uint64_t w[2];
};
#define WEFT_LL_LINE_DATA 8

/* The memory of one connector, mapped by both sides. */
struct weft_conn_mem {
  void* base;
  size_t size;
  size_t simple_bytes, ll_bytes;
  int is_shm;
  int owner;  /* created it (the receiving side) */
  int linked; /* shm: peers may still open it (the creator holds shm_fd) */
  int shm_fd; /* the creator's descriptor of the segment while linked */
  char name[64];
  /* Transport-owned connectors (network): state and the function that releases everything. */
  void* transport;
  void (*release)(struct weft_conn_mem* mem);
  /* Network receivers with GPUDirect RDMA (transport/gpu_link.c): the FIFOs, Simple then LL, in
   * GPU memory, where the NIC writes them; the control page stays at base. fifo_dmabuf: a DMA-BUF
   * of [fifo, fifo + fifo_size) for the network, -1 when it registers GPU addresses as they are.
   * fifo_free gives it all back once the proxy is done with it. NULL: the FIFOs follow the
   * control page. */
  char* fifo;
  size_t fifo_size;
  int fifo_dmabuf;
  int fifo_flush, fifo_dev; /* flush the NIC's writes to CUDA device fifo_dev before a Simple step
                               is published (GPUs that do not order them, NCCL_NET_FORCE_FLUSH) */
  void (*fifo_free)(struct weft_conn_mem* mem);
};

/* What the owner sends its peer so the peer can attach (fixed size, no pointers across hosts). */
struct weft_conn_handle {
  uint64_t size, simple_bytes, ll_bytes;
  uint64_t local_ptr; /* same process: the address */
  int is_shm;         /* 0 process memory, 1 POSIX shm, WEFT_CONN_NET: name holds a network handle */
  char name[128];     /* a shm name, or a network handle (WEFT_NET_HANDLE_BYTES) */
};
#define WEFT_CONN_NET 2

/* One side's view: the shared memory plus its own step count. */
struct weft_conn {
  struct weft_conn_ctrl* ctrl;
  char* simple;                /* WEFT_NSTEPS slots of simple_bytes / WEFT_NSTEPS */
  struct weft_ll_line* ll;     /* WEFT_NSTEPS slots of ll_bytes / WEFT_NSTEPS */
  size_t simple_slot, ll_slot; /* bytes per slot */
  uint64_t step;               /* steps this side has posted */
  int peer;                    /* rank at the other end */
  struct weft_conn_mem* mem;
  int by_ref; /* sender: may publish Simple steps by reference (weft_conn_sends_by_ref) */
};

/* Create connector memory (shared: POSIX shm for other processes, else process memory). */
ncclResult_t weft_conn_mem_create(size_t simple_bytes, size_t ll_bytes, int shared, const char* tag,
                                  struct weft_conn_mem** out, struct weft_conn_handle* handle);
ncclResult_t weft_conn_mem_attach(const struct weft_conn_handle* handle, struct weft_conn_mem** out);
/* Once every side has mapped the shm segment: close the descriptor peers open it through. */
void weft_conn_mem_unlink(struct weft_conn_mem* mem);
/* Drop this side's use; NULL-safe. */
void weft_conn_mem_release(struct weft_conn_mem* mem);
/* Unmap the process-private block of a connector made with shared = 0 (for transports whose
 * release hook owns it alone). */
void weft_conn_mem_free_base(struct weft_conn_mem* mem);
void weft_conn_bind(struct weft_conn* conn, struct weft_conn_mem* mem, int peer);
/* Bytes per slot of a FIFO created with fifo_bytes (created FIFOs are rounded up to pages). */
size_t weft_conn_slot_bytes(size_t fifo_bytes);
/* Senders record what the step they are about to publish carries (see step_info). */
static inline void weft_conn_note_step(struct weft_conn* c, size_t bytes, int ll) {
  c->ctrl->step_info[c->step % WEFT_NSTEPS] = (uint32_t)bytes | (ll ? WEFT_STEP_LL : 0);
  c->ctrl->step_ref[c->step % WEFT_NSTEPS] = 0; /* in the slot, unless the sender says otherwise */
}
/* Senders with by_ref: the step about to be published lies at ref (after weft_conn_note_step). */
static inline void weft_conn_note_ref(struct weft_conn* c, const void* ref) {
  c->ctrl->step_ref[c->step % WEFT_NSTEPS] = (uint64_t)(uintptr_t)ref;
}
/* Whether this send connector's steps may be published by reference (step_ref): a network
 * connector, whose proxy runs in this process and reads the payload where it lies. */
static inline int weft_conn_sends_by_ref(const struct weft_conn* c) {
  return c != NULL && c->mem != NULL && c->mem->transport != NULL;
}

/* Shared memory segments between processes of one host (transport/shm.c). They have no name
 * in /dev/shm: peers open name, /proc/<pid>/fd/<fd> of the creator, while the creator keeps fd
 * open, so nothing is left behind however a process ends. */
struct weft_shm_seg {
  void* ptr;
  size_t size;
  int fd; /* creator: the descriptor peers open through name; -1 once unshared */
  char name[64];
};
/* Create, size (with space reserved up front, so a full /dev/shm is an error and not a SIGBUS)
 * and map a new segment; tag labels it in logs (and in /proc/<pid>/maps for a memfd). */
ncclResult_t weft_shm_create(const char* tag, size_t size, struct weft_shm_seg* seg);
ncclResult_t weft_shm_open(const char* name, size_t size, struct weft_shm_seg* seg);
/* Creator: no peer may open the segment from now on (every one that needs it has it mapped). */
void weft_shm_unshare(struct weft_shm_seg* seg);
/* Unshare (creator) and unmap; NULL-safe. */
void weft_shm_close(struct weft_shm_seg* seg);

#endif
