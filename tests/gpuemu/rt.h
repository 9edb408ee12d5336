/* What the emulated CUDA runtime's files (rt_*.c) share: error recording, devices, the allocation
 * registry, streams with their operation queues, events, stream capture and graphs. */
#ifndef WEFT_TESTS_GPUEMU_RT_H
#define WEFT_TESTS_GPUEMU_RT_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>

#include "emu.h"

/* The CUDA header declares the API without a visibility attribute and we build with
 * -fvisibility=hidden, so each definition of a CUDA entry point carries this. */
#define RT_API __attribute__((visibility("default")))

/* ---- errors (rt_error.c) ---- */
/* Records err as this thread's last error when it is not cudaSuccess; returns err. */
cudaError_t rt_error(cudaError_t err);

/* ---- driver API entry points (rt_driver.c) ---- */
/* The emulated driver function named symbol in its ABI of CUDA version `version` (1000 * major +
 * 10 * minor); NULL when there is none, *status saying why (symbol not found / version too old). */
void* rt_driver_symbol(const char* symbol, unsigned version, enum cudaDriverEntryPointQueryResult* status);

/* ---- devices (rt_device.c) ---- */
int rt_device_count(void);
int rt_device_valid(int dev);
/* Ordinals are this process's (CUDA_VISIBLE_DEVICES); physical indices are the machine's, which
 * is what IPC handles and PCI ids name. -1: not a device / not visible here. */
int rt_device_physical(int dev);
int rt_device_from_physical(int phys);
int rt_physical_peers(int a, int b); /* physical devices a and b can map each other's memory */
int rt_device_current(void);         /* this host thread's current device (0 until cudaSetDevice) */
/* cudaDeviceGetAttribute without recording an error as the thread's last (for driver calls). */
cudaError_t rt_device_attribute(int* value, enum cudaDeviceAttr attr, int dev);
/* WEFT_EMU_GDR_UNORDERED=1: NIC writes to device memory are not ordered for its kernels
 * (rt_driver.c); cudaDeviceFlushGPUDirectRDMAWrites is then what orders them (returns 1);
 * =noflush: nor can they be flushed (returns 2). */
int rt_gdr_unordered(void);
#define RT_DEVICE_MEM ((size_t)141 * 1000 * 1000 * 1000)

/* ---- time ---- */
uint64_t rt_now_ns(void);

/* ---- allocation registry (rt_mem.c) ---- */
enum rt_mem_kind { RT_MEM_NONE = 0, RT_MEM_DEVICE, RT_MEM_PINNED, RT_MEM_REGISTERED, RT_MEM_IPC };

/* The first page of every cudaMalloc mapping; shared with importing processes through the memfd. */
#define RT_HDR_MAGIC 0x5745465445465531ull /* "WEFTEFU1" */
#define RT_HDR_SLOTS 256
#define RT_PAGE 4096ul
struct rt_hdr {
  uint64_t magic;
  uint64_t size;                       /* user bytes (rounded to a page) */
  uint64_t id;                         /* unique per allocation: tells a reused fd number from the original */
  int32_t dev;                         /* physical */
  int32_t owner;                       /* pid */
  _Atomic int32_t importers;           /* processes that have it open through CUDA IPC */
  _Atomic int32_t slots[RT_HDR_SLOTS]; /* their pids, so that a dead importer is not counted */
};

struct rt_alloc {
  uintptr_t base; /* what the user sees */
  size_t size;
  enum rt_mem_kind kind;
  int dev;
  void* map; /* the whole mapping (header page included for device memory); NULL when registered */
  size_t map_len;
  int fd; /* memfd of device memory, -1 otherwise */
  /* IPC imports: the exporter's identity, and how many opens this process made of it */
  int32_t ipc_pid, ipc_fd;
  uint64_t ipc_id;
  int ipc_opens;
};

extern pthread_mutex_t rt_mem_lock;
/* Adds a (non-overlapping) range; cudaErrorHostMemoryAlreadyRegistered when it overlaps one. */
cudaError_t rt_mem_insert(const struct rt_alloc* a);
cudaError_t rt_mem_insert_locked(const struct rt_alloc* a);
/* This process's import of the allocation with that id (rt_mem_lock held); NULL when none. */
struct rt_alloc* rt_mem_find_import_locked(uint64_t id);
/* The allocation holding p, copied to *out (may be NULL); 0 when none. Locks rt_mem_lock. */
int rt_mem_find(const void* p, struct rt_alloc* out);
/* Same, with rt_mem_lock held by the caller; returns the entry in place. */
struct rt_alloc* rt_mem_find_locked(const void* p);
/* Removes the allocation starting at base (rt_mem_lock held); 0 when there is none. */
int rt_mem_remove_locked(uintptr_t base, struct rt_alloc* out);
/* Device memory, pinned or registered host memory holding all of [p, p+n): RT_MEM_* (device for
 * IPC imports too, as weft_emu_pointer_kind reports it), 0 unknown, -1 when the range overruns. */
int rt_mem_range_kind(const void* p, size_t n, int* dev);
void rt_mem_fork_child(void);

/* ---- operations queued on streams (rt_stream.c runs them) ---- */
struct rt_event;
struct rt_stream;
struct rt_graph_exec;

enum rt_op_kind {
  RT_OP_COPY,
  RT_OP_SET,
  RT_OP_KERNEL,
  RT_OP_HOST,        /* cudaLaunchHostFunc */
  RT_OP_CALLBACK,    /* cudaStreamAddCallback */
  RT_OP_RECORD,      /* cudaEventRecord */
  RT_OP_WAIT_EVENT,  /* cudaStreamWaitEvent */
  RT_OP_WAIT_STREAM, /* implicit legacy-stream ordering: wait until s->done >= seq */
  RT_OP_GRAPH,       /* cudaGraphLaunch: runs the executable graph's nodes in order */
};

struct rt_op {
  struct rt_op* next;
  enum rt_op_kind kind;
  union {
    struct {
      void* dst;
      const void* src;
      size_t n;
      void* staged; /* a copy of pageable source memory taken at the call, freed with the op */
    } copy;
    struct {
      void* dst;
      int value;
      size_t n;
    } set;
    struct {
      const struct weft_emu_kernel* k;
      void* packed;
      struct weft_emu_dim grid, block;
      int borrowed; /* packed belongs to a graph: neither destroyed nor freed after the run */
    } kernel;
    struct {
      cudaHostFn_t fn;
      void* arg;
    } host;
    struct {
      cudaStreamCallback_t fn;
      void* arg;
      cudaStream_t handle;
    } callback;
    struct {
      struct rt_event* ev;
      uint64_t gen;
    } event;
    struct {
      struct rt_stream* s;
      uint64_t seq;
    } wait;
    struct {
      struct rt_graph_exec* exec;
      uint64_t* event_gens; /* per event node, in node order: the generation this launch uses */
    } graph;
  } u;
};

/* Global lock of streams, events and captures; rt_progress is broadcast whenever an operation
 * completes, which is what every waiter (host thread or stream worker) sleeps on. */
extern pthread_mutex_t rt_lock;
extern pthread_cond_t rt_progress;
extern unsigned rt_fork_gen; /* bumped in a forked child: objects of the parent are stale there */

#define RT_STREAM_MAGIC 0x5354524du
enum rt_stream_role { RT_STREAM_USER, RT_STREAM_LEGACY, RT_STREAM_PER_THREAD };
struct rt_capture;

struct rt_stream {
  uint32_t magic;
  unsigned gen; /* rt_fork_gen at creation */
  enum rt_stream_role role;
  int dev;
  unsigned flags;
  int priority;
  unsigned long long id;
  struct rt_op *head, *tail; /* queued, not started */
  uint64_t issued, done;     /* operations queued so far / completed so far */
  cudaError_t async_err;     /* a kernel's failure, reported by the next synchronization */
  int has_worker, destroyed, refs;
  pthread_cond_t work;
  struct rt_stream *prev_all, *next_all; /* every live stream of the process */
  /* stream capture: the sequence this stream belongs to, ops it added, ops another stream
   * of the capture has waited for (what "rejoined" means in this model) */
  struct rt_capture* cap;
  uint64_t cap_ops, cap_joined_ops;
};

struct rt_op* rt_op_new(enum rt_op_kind kind);
/* Frees an op that will never run (drops what it holds). rt_lock held. */
void rt_op_discard_locked(struct rt_op* op);
/* Runs one op on stream s's worker (or inside a graph); rt_lock not held. */
void rt_op_run(struct rt_stream* s, struct rt_op* op);

/* The stream a handle names (0, cudaStreamLegacy, cudaStreamPerThread resolved for the current
 * device); NULL with *err set when the handle is invalid. rt_lock held. */
struct rt_stream* rt_stream_resolve_locked(cudaStream_t h, cudaError_t* err);
/* Queues op on stream h (or adds it to h's capture). Takes op in every case. */
cudaError_t rt_stream_submit(cudaStream_t h, struct rt_op* op);
cudaError_t rt_stream_submit_locked(struct rt_stream* s, struct rt_op* op); /* rt_lock held */
/* Queues op and waits until it has run (synchronous copies on the legacy stream). */
cudaError_t rt_stream_submit_wait(cudaStream_t h, struct rt_op* op);
int rt_stream_capturing(cudaStream_t h); /* h is valid and part of a capture */
/* Waits until s has completed everything queued before the call. rt_lock held. */
void rt_stream_wait_idle_locked(struct rt_stream* s);
void rt_stream_unref_locked(struct rt_stream* s);
/* Waits for every stream of device dev in this process (cudaDeviceSynchronize, cudaFree). */
cudaError_t rt_device_sync(int dev);

/* ---- events (rt_event.c) ---- */
#define RT_EVENT_MAGIC 0x45564e54u
struct rt_event {
  uint32_t magic;
  unsigned gen;
  unsigned flags;
  uint64_t recorded, completed; /* generation counters: records issued / executed */
  uint64_t time_ns;             /* when the latest completed record executed */
  int destroyed, refs;
  /* last recorded inside a capture: its id (0: recorded outside any), on which stream (valid
   * while that capture is active: it holds a reference), after how many of that stream's ops */
  unsigned long long cap_id;
  struct rt_stream* cap_stream;
  uint64_t cap_ops;
};
struct rt_event* rt_event_check_locked(cudaEvent_t e); /* NULL when e is not a live event */
/* Stream h and event e of a record or a wait; *err says which one is not live. */
struct rt_stream* rt_stream_event_locked(cudaStream_t h, cudaEvent_t e, struct rt_event** ev,
                                         cudaError_t* err);
void rt_event_unref_locked(struct rt_event* ev);
void rt_event_complete(struct rt_event* ev, uint64_t gen); /* a record op ran */
/* The same with rt_lock held: a stream's last record completes in the step that counts it done. */
void rt_event_complete_locked(struct rt_event* ev, uint64_t gen, uint64_t now);
void rt_event_wait(struct rt_event* ev, uint64_t gen); /* a wait op runs */

/* ---- stream capture and graphs (rt_graph.c) ---- */
struct rt_capture {
  struct rt_capture* next; /* all active captures */
  struct rt_stream* origin;
  struct rt_graph* graph;
  enum cudaStreamCaptureMode mode;
  pthread_t thread;
  int invalidated;
  unsigned long long id;
  struct rt_stream** joined; /* streams other than origin that joined */
  int njoined, cap_joined;
};
/* A graph is its nodes in one valid order (the capture's issue order); an executable graph
 * shares them (it keeps the graph alive), and kernel nodes keep their packed arguments. */
struct rt_graph {
  uint32_t magic;
  unsigned gen;
  struct rt_op *head, *tail;
  size_t nodes;
  int refs, destroyed;
};
struct rt_graph_exec {
  uint32_t magic;
  unsigned gen;
  struct rt_graph* graph;
  int refs, destroyed;
};
/* Appends op to s's capture graph (s->cap set). rt_lock held; takes op. */
cudaError_t rt_capture_add_locked(struct rt_stream* s, struct rt_op* op);
/* A record / wait-event on a capturing stream, handled as capture bookkeeping. rt_lock held. */
cudaError_t rt_capture_record_locked(struct rt_stream* s, struct rt_event* ev);
cudaError_t rt_capture_wait_locked(struct rt_stream* s, struct rt_event* ev, unsigned flags);
/* An external event node (cudaEventRecordExternal / cudaEventWaitExternal under capture): kind is
 * RT_OP_RECORD or RT_OP_WAIT_EVENT, and each launch of the graph records or waits as a stream op
 * issued at cudaGraphLaunch would. rt_lock held. */
cudaError_t rt_capture_event_node_locked(struct rt_stream* s, struct rt_event* ev, enum rt_op_kind kind);
int rt_capture_active_locked(unsigned long long id); /* that capture is still in progress */
/* Invalidates s's capture (an unsupported call on it); returns cudaErrorStreamCaptureUnsupported. */
cudaError_t rt_capture_fail_locked(struct rt_stream* s);
/* A potentially unsafe call (sync copy, cudaMalloc...) from this thread: an error when a capture
 * forbids it under the capture-mode rules (and those captures are invalidated), else success. */
cudaError_t rt_capture_check_unsafe(void);
int rt_capture_legacy_conflict_locked(int dev); /* a blocking stream of dev is capturing */
void rt_graph_exec_unref_locked(struct rt_graph_exec* x);
/* Runs a graph launch (an RT_OP_GRAPH op) on s's worker: its nodes in order. */
void rt_graph_run(struct rt_stream* s, struct rt_op* launch);
void rt_graph_fork_child(void);

#endif
