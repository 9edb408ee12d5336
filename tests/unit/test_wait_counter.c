/* Counter waits of the shared boards (wait.h), counted in futex sleeps rather than timed:
 * - two ranks on one CPU: a waiter must yield to the peer it waits for, not spin its budget
 *   out and sleep (the cause of the 60 us bimodal small all-reduce). Run under SCHED_FIFO where
 *   permitted, so that no time slice ends a spin and the count is exact: without the yield every
 *   round sleeps once;
 * - the budget: a wait that follows a wait answered while spinning outlasts a 20 ms delay of the
 *   peer (WEFT_SPIN_BUSY_USEC) without sleeping; one that follows a sleep, or with
 *   WEFT_SPIN_BUSY_USEC=0, sleeps after WEFT_SPIN_USEC;
 * - a rank moves itself off a CPU of its mask, which it keeps. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "collectives/host/wait.h"

#define ROUNDS 2000

/* What a rank publishes: its counter, its sleepers and the CPU its waits last ran on. */
struct side {
  uint64_t counter;
  uint32_t sleepers, failed;
  int32_t cpu;
} __attribute__((aligned(64)));

static struct side sides[2];
static volatile uint32_t abort_flag;
static uint64_t sleeps[2];
static int fifo_ok[2], pin_cpu;
static pthread_barrier_t started;

static void pin_and_raise(int me) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(pin_cpu, &set);
  EXPECT(sched_setaffinity(0, sizeof(set), &set) == 0);
  struct sched_param sp = {.sched_priority = 1};
  fifo_ok[me] = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0;
  sides[me].cpu = pin_cpu; /* as if each rank had waited once already */
  pthread_barrier_wait(&started);
}

/* Rank me of a ping-pong: rank 0 posts round i and waits for rank 1's, rank 1 the reverse. */
static void* pingpong(void* arg) {
  int me = (int)(intptr_t)arg, other = 1 - me;
  pin_and_raise(me);
  struct weft_waiter w;
  weft_waiter_init(&w, &abort_flag, me, 2);
  w.cpu_slot = &sides[me].cpu;
  for (uint64_t i = 1; i <= ROUNDS; i++) {
    if (me == 0) weft_host_post_counter(&sides[me].counter, &sides[me].sleepers, i);
    struct side* o = &sides[other];
    EXPECT_EQ_INT(
        weft_host_wait_counter(&w, &o->counter, i, &o->sleepers, &o->failed, &o->cpu, other, "test"),
        ncclSuccess);
    if (me == 1) weft_host_post_counter(&sides[me].counter, &sides[me].sleepers, i);
  }
  sleeps[me] = w.sleeps;
  return NULL;
}

static void same_cpu(void) {
  cpu_set_t set;
  EXPECT(sched_getaffinity(0, sizeof(set), &set) == 0);
  for (pin_cpu = 0; pin_cpu < CPU_SETSIZE && !CPU_ISSET(pin_cpu, &set); pin_cpu++) continue;
  memset(sides, 0, sizeof(sides));
  sides[0].cpu = sides[1].cpu = -1;
  pthread_t t[2];
  pthread_barrier_init(&started, NULL, 2);
  for (int r = 0; r < 2; r++) pthread_create(&t[r], NULL, pingpong, (void*)(intptr_t)r);
  for (int r = 0; r < 2; r++) pthread_join(t[r], NULL);
  pthread_barrier_destroy(&started);
  uint64_t total = sleeps[0] + sleeps[1];
  int fifo = fifo_ok[0] && fifo_ok[1];
  fprintf(stderr, "same CPU %d, %s: %llu futex sleeps in %d rounds\n", pin_cpu,
          fifo ? "SCHED_FIFO" : "SCHED_OTHER (no permission for SCHED_FIFO)", (unsigned long long)total,
          ROUNDS);
  /* Under SCHED_OTHER other processes on that CPU may take a slice in the middle of a wait. */
  EXPECT_MSG(total <= (fifo ? 0 : ROUNDS / 2), "%llu sleeps", (unsigned long long)total);
}

static void* post_later(void* arg) {
  usleep(20000);
  weft_host_post_counter(&sides[1].counter, &sides[1].sleepers, (uint64_t)(uintptr_t)arg);
  return NULL;
}

/* Wait for sides[1] to reach value, posted 20 ms from now (delayed) or already; returns the
 * sleeps the wait took. */
static uint64_t wait_for(struct weft_waiter* w, uint64_t value, int delayed) {
  pthread_t t;
  uint64_t before = w->sleeps;
  if (delayed)
    pthread_create(&t, NULL, post_later, (void*)(uintptr_t)value);
  else
    weft_host_post_counter(&sides[1].counter, &sides[1].sleepers, value);
  struct side* o = &sides[1];
  EXPECT_EQ_INT(weft_host_wait_counter(w, &o->counter, value, &o->sleepers, &o->failed, NULL, 1, "test"),
                ncclSuccess);
  if (delayed) pthread_join(t, NULL);
  return w->sleeps - before;
}

static void budget(const char* busy_usec, int warm_sleeps) {
  setenv("WEFT_SPIN_BUSY_USEC", busy_usec, 1);
  memset(sides, 0, sizeof(sides));
  struct weft_waiter w;
  struct weft_wait_memory memory = {0};
  weft_waiter_init(&w, &abort_flag, 0, 2);
  w.memory = &memory;
  EXPECT_MSG(wait_for(&w, 1, 1) >= 1, "a cold wait spins only WEFT_SPIN_USEC");
  EXPECT_EQ_INT(memory.peers_active, 0);
  EXPECT_EQ_INT(wait_for(&w, 2, 0), 0);
  EXPECT_EQ_INT(memory.peers_active, 1);
  uint64_t warm = wait_for(&w, 3, 1);
  EXPECT_MSG(warm_sleeps ? warm >= 1 : warm == 0, "WEFT_SPIN_BUSY_USEC=%s: %llu sleeps", busy_usec,
             (unsigned long long)warm);
  unsetenv("WEFT_SPIN_BUSY_USEC");
}

/* weft_host_move_off_cpu: from CPU a of a two-CPU mask to the other, the mask kept. */
static void move_off(void) {
  cpu_set_t set, two, now;
  EXPECT(sched_getaffinity(0, sizeof(set), &set) == 0);
  int a = -1, b = -1;
  for (int c = 0; c < CPU_SETSIZE && b < 0; c++)
    if (CPU_ISSET(c, &set)) *(a < 0 ? &a : &b) = c;
  if (b < 0) {
    fprintf(stderr, "one CPU: moving off it not checked\n");
    return;
  }
  CPU_ZERO(&two);
  CPU_SET(a, &two);
  EXPECT(sched_setaffinity(0, sizeof(two), &two) == 0); /* now on a */
  CPU_SET(b, &two);
  EXPECT(sched_setaffinity(0, sizeof(two), &two) == 0); /* may stay on a */
  EXPECT_EQ_INT(sched_getcpu(), a);
  EXPECT_EQ_INT(weft_host_move_off_cpu(a), 1);
  EXPECT_EQ_INT(sched_getcpu(), b);
  EXPECT(sched_getaffinity(0, sizeof(now), &now) == 0);
  EXPECT(CPU_EQUAL(&now, &two));
  CPU_ZERO(&two);
  CPU_SET(a, &two);
  EXPECT(sched_setaffinity(0, sizeof(two), &two) == 0);
  EXPECT_EQ_INT(weft_host_move_off_cpu(a), 0); /* nowhere to go */
  EXPECT(sched_setaffinity(0, sizeof(set), &set) == 0);
}

int main(void) {
  setenv("WEFT_SPIN_USEC", "50", 1);
  setenv("WEFT_SPIN_BUSY_USEC", "0", 1); /* the yield alone: the short budget */
  same_cpu();
  budget("2000000", 0);
  budget("0", 1);
  move_off();
  return test_finish("wait_counter");
}
