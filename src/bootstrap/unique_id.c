/* ncclGetUniqueId's content: a random magic, a random job key and the address of a root started
 * in this process, or, with NCCL_COMM_ID set, NCCL's fixed magic, the key derived from
 * WEFT_JOB_SECRET and that address (rank 0 starts the root). */
#include <stdio.h>
#include <string.h>

#include "bootstrap/internal.h"
#include "util/check.h"
#include "util/log.h"
#include "util/param.h"
#include "util/psk.h"

_Static_assert(sizeof(struct weft_bootstrap_handle) <= WEFT_BOOTSTRAP_ID_BYTES,
               "handle must fit in the bootstrap's part of ncclUniqueId");

ncclResult_t weft_bs_conn_key(const struct weft_auth_key* job, struct weft_auth_key* out) {
  uint8_t psk[WEFT_PSK_DIGEST_BYTES];
  int on = weft_psk_digest(psk);
  if (on < 0) return ncclInvalidUsage;
  weft_auth_conn_key(job, on ? psk : NULL, on ? sizeof(psk) : 0, out);
  memset(psk, 0, sizeof(psk));
  return ncclSuccess;
}

static ncclResult_t random_magic(uint64_t* magic) {
  do {
    WEFT_CHECK(weft_auth_random(magic, sizeof(*magic)));
  } while (*magic == 0 || *magic == WEFT_BOOTSTRAP_COMM_ID_MAGIC);
  return ncclSuccess;
}

ncclResult_t weft_bootstrap_get_unique_id(ncclUniqueId* id) {
  WEFT_ARG_CHECK(id != NULL, "uniqueId is NULL");
  struct weft_bootstrap_handle h;
  memset(&h, 0, sizeof(h));
  const char* comm_id = weft_param_str("NCCL_COMM_ID");
  char text[WEFT_SOCKET_ADDR_STRLEN];
  if (comm_id != NULL && comm_id[0] != '\0') {
    WEFT_CHECK(weft_socket_addr_parse(comm_id, weft_socket_family(), &h.addr));
    h.magic = WEFT_BOOTSTRAP_COMM_ID_MAGIC;
    weft_auth_job_key_from_env(&h.key);
    WEFT_INFO(WEFT_BOOTSTRAP | WEFT_ENV,
              "NCCL_COMM_ID set by environment to %s: root at %s (rank 0 starts it), %s", comm_id,
              weft_socket_addr_str(&h.addr, text, sizeof(text)),
              weft_auth_is_public(&h.key) ? "unauthenticated" : "key from WEFT_JOB_SECRET");
  } else {
    struct weft_socket_if itf;
    WEFT_CHECK(weft_socket_bootstrap_if(&itf));
    h.addr = itf.addr;
    WEFT_CHECK(random_magic(&h.magic));
    WEFT_CHECK(weft_auth_random(h.key.bytes, sizeof(h.key.bytes)));
    struct weft_auth_key conn;
    WEFT_CHECK(weft_bs_conn_key(&h.key, &conn));
    WEFT_CHECK(weft_bs_root_start(&h.addr, h.magic, &conn));
  }
  memset(id, 0, sizeof(*id));
  memcpy(id->internal, &h, sizeof(h));
  memset(&h, 0, sizeof(h));
  return ncclSuccess;
}
