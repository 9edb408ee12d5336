/* The nccl*Config variants' ncclCollConfig_t: read as NCCL defines it (versioned by size and
 * magic), checked against the communicator, and turned into the options of the call's tasks. */
#ifndef WEFT_COLLECTIVES_COLL_CONFIG_H
#define WEFT_COLLECTIVES_COLL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "collectives/enqueue.h"
#include "nccl.h"

/* Reads and checks a call's config into *opts (logged at INFO/COLL), for a call whose comm is
 * valid. coll: the enum weft_coll the call is planned as, WEFT_COLL_SEND for AlltoAll, Gather and
 * Scatter (sends and receives: nothing to select). */
ncclResult_t weft_enqueue_config(const struct weft_call* call, int coll, const ncclCollConfig_t* config,
                                 struct weft_call_opts* opts);

/* Parses an algSelection text: NCCL's algorithm and protocol names (as NCCL_ALGO and NCCL_PROTO
 * take them: any case, comma separated, blanks and empty items ignored, a leading ^ excluding the
 * names that follow) into WEFT_TUNED_* masks, all bits set for a kind the text does not name.
 * Returns 0, or -1 with the reason in why. */
int weft_coll_sel_parse(const char* text, unsigned* algos, unsigned* protos, char* why, size_t why_size);
/* A selection signature (weft_call_opts.sig) as text for logs: "automatic", or its algorithms,
 * protocols and channel bounds. */
void weft_coll_sel_text(uint64_t sig, char* buf, size_t size);

#endif
