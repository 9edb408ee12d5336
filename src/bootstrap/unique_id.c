/* ncclGetUniqueId's content: a random magic and the address of a root started in this process,
 * or, with NCCL_COMM_ID set, NCCL's fixed magic and that address (rank 0 starts the root). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "bootstrap/internal.h"
#include "util/check.h"
#include "util/log.h"
#include "util/param.h"

_Static_assert(sizeof(struct weft_bootstrap_handle) <= WEFT_BOOTSTRAP_ID_BYTES,
               "handle must fit in the bootstrap's part of ncclUniqueId");

static ncclResult_t random_magic(uint64_t* magic) {
  do {
    ssize_t n = getrandom(magic, sizeof(*magic), 0);
    if (n != (ssize_t)sizeof(*magic)) {
      int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
      n = fd >= 0 ? read(fd, magic, sizeof(*magic)) : -1;
      if (fd >= 0) close(fd);
      if (n != (ssize_t)sizeof(*magic)) {
        WEFT_WARN("Bootstrap: cannot read random bytes for the unique id: %s", strerror(errno));
        return ncclSystemError;
      }
    }
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
    WEFT_INFO(WEFT_BOOTSTRAP | WEFT_ENV,
              "NCCL_COMM_ID set by environment to %s: root at %s (rank 0 starts it)", comm_id,
              weft_socket_addr_str(&h.addr, text, sizeof(text)));
  } else {
    struct weft_socket_if itf;
    WEFT_CHECK(weft_socket_bootstrap_if(&itf));
    h.addr = itf.addr;
    WEFT_CHECK(random_magic(&h.magic));
    WEFT_CHECK(weft_bs_root_start(&h.addr, h.magic));
  }
  memset(id, 0, sizeof(*id));
  memcpy(id->internal, &h, sizeof(h));
  return ncclSuccess;
}
