/* Waits of the host prims: a peer that never sends makes the wait time out naming the peer and
 * channel (after one slow-wait WARN naming the operation and its sequence number); the abort
 * flag ends a wait at once; a peer process that exits is detected and named. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "collectives/host/prims.h"
#include "core/comm.h"
#include "util/log.h"

static struct weft_conn_mem *mem, *peer_mem;
static struct weft_conn recv_conn;

static void make_conn(void) {
  struct weft_conn_handle h;
  weft_conn_mem_create(64 * 1024, 32 * 1024, 0, "test", &mem, &h);
  weft_conn_mem_attach(&h, &peer_mem);
  weft_conn_bind(&recv_conn, mem, 1);
}

static void drop_conn(void) {
  weft_conn_mem_release(mem);
  weft_conn_mem_release(peer_mem);
}

/* Receive one step on channel 2 from rank 1 as rank 0; returns the prims' result. */
static ncclResult_t recv_once(struct weft_waiter* w, int proto) {
  struct weft_dev_redop op = {0};
  int buf[16] = {0};
  struct weft_prims p;
  weft_prims_setup(&p, NULL, &recv_conn, w, 2, proto, WEFT_DT_I32, &op, 0, buf, buf);
  weft_prims_recv(&p, 0, 16);
  weft_prims_teardown(&p);
  return p.err;
}

static volatile uint32_t abort_flag;
static void* raise_abort(void* arg) {
  (void)arg;
  usleep(200000);
  __atomic_store_n(&abort_flag, 1, __ATOMIC_RELEASE);
  return NULL;
}

static int count_lines(const char* path, const char* a, const char* b) {
  FILE* f = fopen(path, "r");
  char line[1024];
  int n = 0;
  while (f && fgets(line, sizeof(line), f))
    if (strstr(line, a) && strstr(line, b)) n++;
  if (f) fclose(f);
  return n;
}

int main(void) {
  char logpath[64];
  snprintf(logpath, sizeof(logpath), "/tmp/weft_test_wait_%d.log", (int)getpid());
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", logpath, 1);
  setenv("WEFT_TIMEOUT", "2", 1);
  setenv("WEFT_WARN_AFTER", "1", 1);
  make_conn();

  /* Timeout, both protocols. */
  for (int proto = 0; proto < 2; proto++) {
    struct weft_waiter w;
    weft_waiter_init(&w, &abort_flag, 0, 2);
    w.opname = "AllReduce";
    w.seq = 42;
    ncclResult_t res = recv_once(&w, proto);
    EXPECT_EQ_INT(res, ncclTimeout);
    const char* text = weft_log_last_error();
    EXPECT_MSG(strstr(text, "peer rank 1") && strstr(text, "channel 2") && strstr(text, "timed out"), "%s",
               text);
  }
  EXPECT_EQ_INT(count_lines(logpath, "has waited", "AllReduce (seq 42)"), 2); /* one per wait */

  /* Abort from another thread. */
  {
    struct weft_waiter w;
    weft_waiter_init(&w, &abort_flag, 0, 2);
    setenv("WEFT_TIMEOUT", "100", 1);
    weft_waiter_init(&w, &abort_flag, 0, 2);
    pthread_t t;
    pthread_create(&t, NULL, raise_abort, NULL);
    uint64_t start = weft_time_ns();
    ncclResult_t res = recv_once(&w, WEFT_PROTO_SIMPLE);
    pthread_join(t, NULL);
    /* The user's own abort, no async error: invalid usage, not "please report this issue". */
    EXPECT_EQ_INT(res, ncclInvalidUsage);
    EXPECT((weft_time_ns() - start) < 2000000000ull);
    abort_flag = 0;
  }

  /* A peer process that exits (and stays a zombie: we reap it only afterwards). */
  {
    pid_t child = fork();
    if (child == 0) {
      usleep(100000);
      _exit(0);
    }
    struct weft_peer_info peers[2] = {{.rank = 0, .pid = (int)getpid()}, {.rank = 1, .pid = (int)child}};
    strcpy(peers[1].host_name, "here");
    uint8_t watch[2] = {0, 1};
    struct weft_waiter w;
    weft_waiter_init(&w, &abort_flag, 0, 2);
    w.peers = peers;
    w.watch = watch;
    uint64_t start = weft_time_ns();
    ncclResult_t res = recv_once(&w, WEFT_PROTO_SIMPLE);
    EXPECT(res == ncclRemoteError);
    EXPECT((weft_time_ns() - start) < 5000000000ull);
    const char* text = weft_log_last_error();
    EXPECT_MSG(strstr(text, "peer rank 1") && strstr(text, "exited"), "%s", text);
    waitpid(child, NULL, 0);
  }
  drop_conn();
  unlink(logpath);
  return test_finish("prims_wait");
}
