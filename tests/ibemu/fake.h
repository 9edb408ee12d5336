/* The test verbs provider's shared pieces: devices (fake_verbs.c) and the emulated RC fabric
 * between processes (fake_fabric.c). */
#ifndef WEFT_TESTS_IBEMU_FAKE_H
#define WEFT_TESTS_IBEMU_FAKE_H

#include <pthread.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "../gpuemu/emu_dmabuf.h" /* the emulated CUDA runtime's DMA-BUF records */

struct fake_device {
  struct ibv_device dev; /* first: the library hands out &dev */
  int index, ethernet, ports, down;
  char pci[16]; /* its PCI address ("0000:1a:00.1"), "" when not given */
};

/* An open device: its listener is where peers' queue pairs connect (the "wire"). */
struct fake_context {
  struct ibv_context ctx; /* first */
  int listen_fd;
  uint16_t tcp_port; /* reported as every port's LID */
  uint32_t ip;       /* network order; in every GID's last 4 bytes */
  pthread_t acceptor;
  int acceptor_running;
};

static inline struct fake_device* fake_dev_of(struct ibv_context* ctx) {
  return (struct fake_device*)ctx->device;
}
static inline struct fake_context* fake_ctx_of(struct ibv_context* ctx) { return (struct fake_context*)ctx; }

/* Test-only, exported (tests find it with dlsym): registrations that succeeded (ibv_reg_mr and
 * the calls that come down to it, ibv_reg_dmabuf_mr included), ibv_dereg_mr calls that succeeded,
 * regions registered now, writes with immediate data other than a rejection (the IB network's
 * messages: under adaptive routing an empty one follows the data), and the registrations made
 * through ibv_reg_dmabuf_mr (GPU memory), in this process so far. */
#define WEFT_FAKE_NCOUNTS 5
void weft_fake_verbs_counts(uint64_t out[WEFT_FAKE_NCOUNTS]);

/* fake_verbs.c: how many devices WEFT_FAKE_IB_DEVICES describes (at most FAKE_MAX_DEVICES). */
#define FAKE_MAX_DEVICES 16
int fake_ndevices(void);

/* fake_fabric.c: starts and stops a context's listener and fills its data-path ops. */
int fake_fabric_open(struct fake_context* fc);
void fake_fabric_close(struct fake_context* fc);

#endif
