/* The proxy progress thread over loopback sockets, with this test playing both executors:
 * head/tail credits exactly as the host executor expects (never a slot overwritten before it is
 * consumed, never a credit before a send completes), FIFO wrap-around over many steps, Simple and
 * LL, order; a lost peer fails the waiting side naming the rank; teardown forwards steps still in
 * the FIFO; abort makes teardown return at once. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "collectives/host/wait.h"
#include "conn_steps.h"
#include "net_pair.h"
#include "proxy/proxy.h"
#include "transport/connector.h"
#include "transport/net.h"

static const struct weft_net_ops* net = &weft_net_socket_ops;
static char log_path[256];

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void nap_us(long us) {
  struct timespec ts = {0, us * 1000};
  nanosleep(&ts, NULL);
}

/* One side of a link: its FIFO, the executor's view, the proxy connection, its error state. */
struct side {
  struct weft_conn_mem* mem;
  struct weft_conn v;
  struct weft_proxy_conn* px;
  volatile uint32_t abort_flag;
  volatile ncclResult_t async;
};

static int side_start(struct side* sd, int is_send, void* comm, int rank, int peer, const char* host,
                      size_t simple) {
  struct weft_conn_handle h;
  memset(sd, 0, sizeof(*sd));
  if (weft_conn_mem_create(simple, 64 * 1024, 0, "tproxy", &sd->mem, &h) != ncclSuccess) return -1;
  weft_conn_bind(&sd->v, sd->mem, peer);
  struct weft_proxy_conn_desc d = {.is_send = is_send,
                                   .mem = sd->mem,
                                   .net = net,
                                   .net_comm = comm,
                                   .rank = rank,
                                   .peer = peer,
                                   .abort_flag = &sd->abort_flag,
                                   .async_result = &sd->async};
  snprintf(d.peer_host, sizeof(d.peer_host), "%s", host);
  return weft_proxy_conn_add(&d, &sd->px) == ncclSuccess ? 0 : -1;
}

static void side_stop(struct side* sd) {
  weft_proxy_conn_remove(sd->px);
  sd->px = NULL;
  ((struct weft_conn_ctrl*)sd->mem->base)->refs = 1; /* one side in this test, not two */
  weft_conn_mem_release(sd->mem);
}

/* nsteps steps through a proxy pair; the receiver sometimes lags so the FIFO fills and wraps. */
static void run_stream(const char* nthreads, int ll, uint64_t nsteps, size_t slot_bytes) {
  setenv("NCCL_SOCKET_NTHREADS", nthreads, 1);
  void *s, *r;
  if (net_pair(net, &s, &r) != 0) {
    EXPECT_MSG(0, "loopback pair");
    return;
  }
  struct side snd, rcv;
  EXPECT(side_start(&snd, 1, s, 0, 1, "hB, 127.0.0.1", slot_bytes * WEFT_NSTEPS) == 0);
  EXPECT(side_start(&rcv, 0, r, 1, 0, "hA, 127.0.0.1", slot_bytes * WEFT_NSTEPS) == 0);
  int bad = 0, credit_bad = 0;
  double t0 = now_s();
  while (rcv.v.step < nsteps && now_s() - t0 < 60) {
    int moved = 0;
    while (snd.v.step < nsteps && try_send(&snd.v, ll)) moved = 1;
    /* A credit is returned only after the proxy took the step: head never passes tail. */
    if (ld(&snd.v.ctrl->head) > ld(&snd.v.ctrl->tail)) credit_bad++;
    if ((rcv.v.step / 37) % 3 == 2) nap_us(200); /* lag: the proxy must hold back at NSTEPS */
    while (try_recv(&rcv.v, ll, &bad)) moved = 1;
    if (!moved) sched_yield();
  }
  EXPECT_MSG(rcv.v.step == nsteps, "%s: %llu of %llu steps arrived", ll ? "LL" : "Simple",
             (unsigned long long)rcv.v.step, (unsigned long long)nsteps);
  EXPECT_MSG(bad == 0, "%s: %d wrong words or FIFO overruns", ll ? "LL" : "Simple", bad);
  EXPECT_EQ_INT(credit_bad, 0);
  /* Exactly as many credits as steps, and exactly as many steps published as sent. */
  double t1 = now_s();
  while (ld(&snd.v.ctrl->head) < nsteps && now_s() - t1 < 5) nap_us(100);
  EXPECT_EQ_INT(ld(&snd.v.ctrl->head), nsteps);
  EXPECT_EQ_INT(ld(&rcv.v.ctrl->tail), nsteps);
  EXPECT(snd.abort_flag == 0 && rcv.abort_flag == 0);
  side_stop(&snd);
  side_stop(&rcv);
  EXPECT(snd.abort_flag == 0 && rcv.abort_flag == 0 && rcv.async == ncclSuccess);
  printf("stream %s, %s helper thread(s): %llu steps in %.2f s\n", ll ? "LL" : "Simple", nthreads,
         (unsigned long long)nsteps, now_s() - t0);
}

/* Teardown right after publishing: the proxy forwards what is still in the FIFO, then says
 * goodbye, so the receiver sees every step and no error. */
static void run_teardown_flush(void) {
  void *s, *r;
  if (net_pair(net, &s, &r) != 0) {
    EXPECT_MSG(0, "loopback pair");
    return;
  }
  struct side snd, rcv;
  EXPECT(side_start(&snd, 1, s, 0, 1, "hB, 127.0.0.1", 256 * 1024) == 0);
  EXPECT(side_start(&rcv, 0, r, 1, 0, "hA, 127.0.0.1", 256 * 1024) == 0);
  while (snd.v.step < WEFT_NSTEPS && try_send(&snd.v, 0)) continue; /* a full FIFO, all unsent */
  EXPECT_EQ_INT(snd.v.step, WEFT_NSTEPS);
  side_stop(&snd); /* returns once drained */
  int bad = 0;
  double t0 = now_s();
  while (rcv.v.step < WEFT_NSTEPS && now_s() - t0 < 10)
    if (!try_recv(&rcv.v, 0, &bad)) nap_us(100);
  EXPECT_EQ_INT(rcv.v.step, WEFT_NSTEPS);
  EXPECT_EQ_INT(bad, 0);
  nap_us(100000); /* the goodbye and the EOF after it arrive: still no error */
  EXPECT(rcv.abort_flag == 0 && rcv.async == ncclSuccess);
  side_stop(&rcv);
}

static int log_has(const char* needle) {
  FILE* f = fopen(log_path, "r");
  if (f == NULL) return 0;
  char line[1024];
  int found = 0;
  while (!found && fgets(line, sizeof(line), f)) found = strstr(line, needle) != NULL;
  fclose(f);
  return found;
}

/* The sending process dies (its sockets close with no goodbye): the receiver's executor,
 * waiting for data, gets ncclRemoteError well within WEFT_TIMEOUT, and the WARN names the
 * rank and its host. */
static void run_sender_lost(void) {
  void *s, *r;
  if (net_pair(net, &s, &r) != 0) {
    EXPECT_MSG(0, "loopback pair");
    return;
  }
  struct side rcv;
  EXPECT(side_start(&rcv, 0, r, 4, 7, "hX, 10.9.8.7", 64 * 1024) == 0);
  struct weft_waiter w;
  weft_waiter_init(&w, &rcv.abort_flag, 4, 8);
  w.async_result = &rcv.async;
  double t0 = now_s();
  net->close_send(s);
  ncclResult_t res = weft_host_wait(&w, tail_ready, &rcv.v, &rcv.v.ctrl->tail, &rcv.v.ctrl->tail_waiting, 7,
                                    0, "test receive");
  double took = now_s() - t0;
  EXPECT_MSG(res == ncclRemoteError, "receiver's wait gave %d", res);
  EXPECT_MSG(took < 5, "receiver's wait took %.2f s", took);
  EXPECT(rcv.abort_flag == 1);
  EXPECT_MSG(log_has("peer rank 7 (host hX, 10.9.8.7)"), "no WARN naming rank 7 and its host in %s",
             log_path);
  side_stop(&rcv);
}

/* The receiving process dies while the sender streams: the sender's executor, waiting for
 * credits, fails the same way. */
static void run_receiver_lost(void) {
  void *s, *r;
  if (net_pair(net, &s, &r) != 0) {
    EXPECT_MSG(0, "loopback pair");
    return;
  }
  struct side snd;
  EXPECT(side_start(&snd, 1, s, 2, 5, "hY, 10.9.8.5", 1 << 20) == 0);
  struct weft_waiter w;
  weft_waiter_init(&w, &snd.abort_flag, 2, 8);
  w.async_result = &snd.async;
  double t0 = now_s();
  net->close_recv(r);
  ncclResult_t res = ncclSuccess;
  while (res == ncclSuccess && now_s() - t0 < 20) {
    res = weft_host_wait(&w, head_ready, &snd.v, &snd.v.ctrl->head, &snd.v.ctrl->head_waiting, 5, 0,
                         "test send");
    if (res == ncclSuccess) try_send(&snd.v, 0);
  }
  double took = now_s() - t0;
  EXPECT_MSG(res == ncclRemoteError, "sender's wait gave %d", res);
  EXPECT_MSG(took < 5, "sender's wait took %.2f s", took);
  EXPECT_MSG(log_has("peer rank 5 (host hY, 10.9.8.5)"), "no WARN naming rank 5 and its host");
  side_stop(&snd);
}

static void* remove_thread(void* a) {
  side_stop(a);
  return NULL;
}

/* A peer that stays connected but never receives: teardown waits to forward the FIFO (drain)
 * until the communicator is aborted, then returns promptly. */
static void run_abort_teardown(void) {
  void *s, *r;
  if (net_pair(net, &s, &r) != 0) {
    EXPECT_MSG(0, "loopback pair");
    return;
  }
  struct side snd;
  EXPECT(side_start(&snd, 1, s, 0, 1, "hZ, 127.0.0.1", 4 << 20) == 0);
  /* Fill the FIFO and the socket buffers until credits stop coming back. */
  double t0 = now_s(), last = now_s();
  while (now_s() - last < 0.3 && now_s() - t0 < 20) {
    if (try_send(&snd.v, 0))
      last = now_s();
    else
      nap_us(1000);
  }
  EXPECT_MSG(ld(&snd.v.ctrl->head) < snd.v.step, "steps stuck in the FIFO (%llu credits of %llu)",
             (unsigned long long)ld(&snd.v.ctrl->head), (unsigned long long)snd.v.step);
  pthread_t th;
  pthread_create(&th, NULL, remove_thread, &snd);
  nap_us(200000);
  EXPECT_EQ_INT(weft_proxy_nconns(), 1); /* still draining */
  double ta = now_s();
  __atomic_store_n(&snd.abort_flag, 1, __ATOMIC_RELEASE);
  pthread_join(th, NULL);
  double took = now_s() - ta;
  EXPECT_MSG(took < 1.0, "teardown took %.2f s after abort", took);
  EXPECT_EQ_INT(weft_proxy_nconns(), 0);
  net->close_recv(r);
}

int main(void) {
  snprintf(log_path, sizeof(log_path), "%s/weft-test-proxy.%d.log",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", log_path, 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("WEFT_TIMEOUT", "30", 1);
  setenv("NCCL_SOCKET_NTHREADS", "0", 1);
  if (net->init() != ncclSuccess) test_skip("no loopback interface for sockets");
  run_stream("0", 0, 3000, 16 * 1024);
  run_stream("0", 1, 3000, 16 * 1024);
  run_stream("2", 0, 400, 256 * 1024); /* steps split over data sockets */
  setenv("NCCL_SOCKET_NTHREADS", "0", 1);
  run_teardown_flush();
  run_sender_lost();
  run_receiver_lost();
  run_abort_teardown();
  EXPECT_EQ_INT(weft_proxy_nconns(), 0);
  if (test_failures == 0) unlink(log_path);
  return test_finish("test_proxy");
}
