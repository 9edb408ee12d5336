/* Topology detection once per host: the host's first rank reads the machine and the other
 * processes of the host take its tree (core/topo_share.c). */
#ifndef WEFT_CORE_TOPO_SHARE_H
#define WEFT_CORE_TOPO_SHARE_H

#include "core/comm.h"

/* Collective over the ranks of each host (after weft_peers_map_hosts); an error only when the
 * bootstrap fails. Afterwards weft_topo_detect_shared parses the shared tree instead of detecting. */
ncclResult_t weft_topo_share_detection(struct ncclComm* comm);

#endif
