/* The process's profiler plugin (NCCL_PROFILER_PLUGIN): loaded at the first communicator's init,
 * closed after the last one's finalize, and called through one interface whatever ABI version
 * it exports: events are described in the v6 layout and converted for older plugins here. */
#ifndef WEFT_COLLECTIVES_PROFILER_LOAD_H
#define WEFT_COLLECTIVES_PROFILER_LOAD_H

#include <stdint.h>

#include "collectives/profiler_abi.h"

/* What the v3 conversion adds to Coll and P2p descriptors (v3's init does not receive it). */
struct weft_prof_ident {
  const char* comm_name;
  uint64_t comm_hash;
};

/* Takes a reference on the plugin, loading it on first use; 0 when there is none (unset and
 * absent, "none", or a load that failed once: that is not retried, as in NCCL). */
int weft_prof_plugin_acquire(void);
void weft_prof_plugin_release(void);
/* The loaded plugin's ABI version (3..6) and name; only between acquire and release. */
int weft_prof_plugin_version(void);
const char* weft_prof_plugin_name(void);

ncclResult_t weft_prof_plugin_init(void** ctx, int* mask, const char* comm_name, uint64_t comm_hash,
                                   int nnodes, int nranks, int rank);
void weft_prof_plugin_finalize(void* ctx);
/* *handle is NULL afterwards when the plugin made no event (or the version has no such type). */
void weft_prof_plugin_start(void* ctx, void** handle, ncclProfilerEventDescr_v6_t* d,
                            const struct weft_prof_ident* id);
void weft_prof_plugin_stop(void* handle);
void weft_prof_plugin_record(void* handle, ncclProfilerEventState_t state,
                             ncclProfilerEventStateArgs_v6_t* args);

#endif
