/* The interleaved scheduler (several ring channels in one thread) must not sleep through a channel
 * that can move. Rank 0 runs a 2-channel broadcast interleaved; rank 1 (the root) feeds channel 1
 * first and channel 0 only after channel 1 is through, as a peer busy on another channel does.
 * Channel 1 has more steps than the FIFO holds, so the root needs rank 0 to drain channel 1 while
 * rank 0's channel 0, which waited longest, still has nothing. A scheduler asleep on channel 0
 * alone waits for it until WEFT_TIMEOUT and both ranks fail. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "collectives/host/exec.h"
#include "collectives/host/interleave.h"
#include "collectives/plan.h"

#define SIMPLE_BYTES (64 * 1024)
#define LL_BYTES (16 * 1024)
#define NCH 2
#define COUNT (64 * 1024) /* int32: 128 KiB per channel, 16 steps of 8 KiB, twice the FIFO */

struct rank_ctx {
  int rank;
  struct weft_plan plan;
  struct weft_conn send[NCH], recv[NCH];
  int32_t* buf;
  volatile uint32_t abort_flag;
  ncclResult_t res;
};

static void* receiver_main(void* arg) {
  struct rank_ctx* x = arg;
  struct weft_waiter w;
  weft_waiter_init(&w, &x->abort_flag, x->rank, 2);
  void* stacks[WEFT_PLAN_MAX_CHANNELS] = {0};
  x->res = weft_host_run_interleaved(x->plan.work, NCH, x->send, x->recv, &w, x->buf, x->buf, stacks);
  weft_host_interleave_free(stacks, WEFT_PLAN_MAX_CHANNELS);
  return NULL;
}

/* The root starts only once rank 0 sleeps on channel 0 (the channel that waited longest). */
static void* root_main(void* arg) {
  struct rank_ctx* x = arg;
  struct rank_ctx* receiver = x - 1;
  while (!__atomic_load_n(&receiver->recv[0].ctrl->tail_waiting, __ATOMIC_ACQUIRE)) sched_yield();
  struct weft_waiter w;
  weft_waiter_init(&w, &x->abort_flag, x->rank, 2);
  x->res = weft_host_run_work(&x->plan.work[1], &x->send[1], &x->recv[1], &w, 1, x->buf, x->buf);
  if (x->res == ncclSuccess)
    x->res = weft_host_run_work(&x->plan.work[0], &x->send[0], &x->recv[0], &w, 0, x->buf, x->buf);
  return NULL;
}

static void plan_rank(struct rank_ctx* x, int rank) {
  struct weft_task t = {.coll = WEFT_COLL_BROADCAST, .count = COUNT, .dtype = ncclInt32, .root = 1};
  struct weft_plan_params pp = {.nranks = 2,
                                .rank = rank,
                                .nchannels = NCH,
                                .simple_slot = SIMPLE_BYTES / WEFT_NSTEPS,
                                .ll_slot = LL_BYTES / WEFT_NSTEPS,
                                .nnodes = 1};
  weft_plan_read_env(&pp);
  weft_plan_coll(&pp, NULL, &t, &x->plan);
  x->rank = rank;
  x->buf = calloc(COUNT, sizeof(int32_t));
}

int main(void) {
  setenv("NCCL_PROTO", "Simple", 1);
  setenv("NCCL_MIN_NCHANNELS", "2", 1);
  setenv("NCCL_MAX_NCHANNELS", "2", 1);
  setenv("WEFT_SPIN_USEC", "100", 1);
  setenv("WEFT_TIMEOUT", "10", 1);
  struct rank_ctx ctx[2];
  memset(ctx, 0, sizeof(ctx));
  plan_rank(&ctx[0], 0);
  plan_rank(&ctx[1], 1);
  EXPECT_EQ_INT(ctx[0].plan.nchannels, NCH);
  for (size_t i = 0; i < COUNT; i++) ctx[1].buf[i] = (int32_t)(i * 7 + 3);
  struct weft_conn_mem *mem[NCH][2], *peer_mem[NCH][2];
  for (int ch = 0; ch < NCH; ch++)
    for (int r = 0; r < 2; r++) {
      struct weft_conn_handle h; /* connector r -> 1-r: owned by the receiver, attached by the sender */
      EXPECT_EQ_INT(weft_conn_mem_create(SIMPLE_BYTES, LL_BYTES, 0, "test", &mem[ch][r], &h), ncclSuccess);
      EXPECT_EQ_INT(weft_conn_mem_attach(&h, &peer_mem[ch][r]), ncclSuccess);
    }
  for (int ch = 0; ch < NCH; ch++)
    for (int r = 0; r < 2; r++) {
      weft_conn_bind(&ctx[r].send[ch], peer_mem[ch][r], 1 - r);
      weft_conn_bind(&ctx[r].recv[ch], mem[ch][1 - r], 1 - r);
    }
  pthread_t th[2];
  pthread_create(&th[0], NULL, receiver_main, &ctx[0]);
  pthread_create(&th[1], NULL, root_main, &ctx[1]);
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  EXPECT_EQ_INT(ctx[0].res, ncclSuccess);
  EXPECT_EQ_INT(ctx[1].res, ncclSuccess);
  size_t bad = 0;
  for (size_t i = 0; i < COUNT; i++) bad += ctx[0].buf[i] != ctx[1].buf[i];
  EXPECT_MSG(bad == 0, "%zu of %d elements differ from the root's", bad, COUNT);
  for (int ch = 0; ch < NCH; ch++)
    for (int r = 0; r < 2; r++) {
      weft_conn_mem_release(mem[ch][r]);
      weft_conn_mem_release(peer_mem[ch][r]);
    }
  free(ctx[0].buf);
  free(ctx[1].buf);
  return test_finish("interleave_sleep");
}
