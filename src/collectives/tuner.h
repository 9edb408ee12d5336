/* External tuner plugins (NCCL_TUNER_PLUGIN, ncclTunerPlugin_v6 .. _v2): the library is loaded
 * once per process while communicators use it; each communicator has its own plugin context. */
#ifndef WEFT_COLLECTIVES_TUNER_H
#define WEFT_COLLECTIVES_TUNER_H

#include <stddef.h>
#include <stdint.h>

#include "collectives/tuner_abi.h"
#include "nccl.h"

struct weft_tuner; /* one communicator's instance */

/* What a plugin's init is told about its communicator. */
struct weft_tuner_comm {
  uint64_t comm_id;
  int rank, nranks, nnodes, ranks_per_node;
};

/* Loads the plugin (first user in the process) and runs its init for this communicator. *out is
 * NULL when there is none to use: NCCL_TUNER_PLUGIN=none, nothing found, no known symbol, or an
 * init that failed (each WARNed where a user asked for a plugin by name). Fails only for memory. */
ncclResult_t weft_tuner_create(const struct weft_tuner_comm* c, struct weft_tuner** out);
/* The plugin's finalize (destroy before v5), then the library's reference. NULL-safe. */
void weft_tuner_destroy(struct weft_tuner* t);
/* Same value on ranks that loaded the same plugin file and version (0 for none). */
uint64_t weft_tuner_identity(const struct weft_tuner* t);
/* "force (v6)": the plugin's own name and the ABI it came by. */
const char* weft_tuner_label(const struct weft_tuner* t);
/* Asks the plugin about one collective: table holds our predicted µs per [algo][proto], or
 * WEFT_TUNER_IGNORE; the plugin may rewrite it and set *nchannels (0: not set). Returns 0 when the
 * plugin failed (WARNed once per communicator): the caller keeps its own choice. */
int weft_tuner_coll_info(struct weft_tuner* t, int coll, size_t bytes, int pipe_ops,
                         float table[WEFT_TUNER_NALGOS][WEFT_TUNER_NPROTOS], int* nchannels);

#endif
