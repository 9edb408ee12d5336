/* The nccl*Config variants' ncclCollConfig_t: read as NCCL defines it (versioned by size and
 * magic), checked against the communicator, and turned into the options of the call's tasks. */
#ifndef WEFT_COLLECTIVES_COLL_CONFIG_H
#define WEFT_COLLECTIVES_COLL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "collectives/enqueue.h"
#include "nccl.h"

/* config NULL: weft_enqueue, the plain call. Otherwise the config is read and checked first,
 * outside the call's implicit group, so a refused config is an error of this call alone (as in
 * NCCL, the rest of an enclosing group still runs). coll: the enum weft_coll the call is planned
 * as, WEFT_COLL_SEND for AlltoAll, Gather and Scatter (sends and receives: nothing to select). */
ncclResult_t weft_enqueue_config(struct weft_call* call, int coll, const ncclCollConfig_t* config,
                                 weft_call_check_fn check, weft_call_build_fn build);

/* Parses an algSelection text: NCCL's algorithm and protocol names (as NCCL_ALGO and NCCL_PROTO
 * take them: any case, comma separated, blanks and empty items ignored, a leading ^ excluding the
 * names that follow) into WEFT_TUNED_* masks, all bits set for a kind the text does not name.
 * Returns 0, or -1 with the reason in why. */
int weft_coll_sel_parse(const char* text, unsigned* algos, unsigned* protos, char* why, size_t why_size);
/* A selection signature (weft_call_opts.sig) as text for logs: "automatic", or its algorithms,
 * protocols and channel bounds. */
void weft_coll_sel_text(uint64_t sig, char* buf, size_t size);

#endif
