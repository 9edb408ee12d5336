/* What a running CUDA kernel tells the flight recorder (collectives/trace.c): per channel, the
 * operation it runs, the steps it passed and the wait it is in; per communicator, the last launch
 * all of whose blocks ended. It lives in host-mapped memory beside the kernel's abort flag
 * (cuda/kernel.h), written by thread 0 of a block with relaxed stores and read by the host at
 * any time, without synchronising a stream. Compiles as C11 and as CUDA. */
#ifndef WEFT_COLLECTIVES_PROGRESS_H
#define WEFT_COLLECTIVES_PROGRESS_H

#include <stdint.h>

/* Every channel's block reports (WEFT_CUDA_MAX_CHANNELS): a wait on any channel may be the one
 * that stopped the job, and a dump without it names the wrong rank. */
#define WEFT_PROGRESS_SLOTS 32

/* What a wait is for (weft_progress_chan.wait, low byte). */
enum { WEFT_PROGRESS_DATA = 1, WEFT_PROGRESS_LL_DATA = 2, WEFT_PROGRESS_CREDIT = 3 };

/* One block's progress, a cache line of its own. The kernel never reads it. */
struct weft_progress_chan {
  uint64_t op;    /* 1 + the 32-bit seq of the work the block runs (or ran last); 0: none yet */
  uint64_t steps; /* steps passed in that work */
  uint64_t wait;  /* (peer + 1) << 8 | WEFT_PROGRESS_*: a wait past its first check; 0: none */
  uint64_t since; /* the GPU's clock (ns) at that wait's first check */
  uint64_t beat;  /* the GPU's clock at its latest check (every WEFT_SPINS_PER_CHECK spins) */
  uint64_t pad[3];
};

struct weft_progress {
  uint64_t launch_done; /* the launch number (weft_cuda_kargs.launch) whose blocks all ended */
  uint64_t pad[7];
  /* [WEFT_PROGRESS_SLOTS]: where blocks past the reported ones write; never read. */
  struct weft_progress_chan chan[WEFT_PROGRESS_SLOTS + 1];
};

#endif
