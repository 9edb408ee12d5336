/* ncclCommGetUniqueId and ncclCommGrow: a 2-rank comm grows to 4 with the new ranks as threads
 * and as processes (the id passed through a pipe), existing ranks keeping theirs, and a checked
 * all-reduce runs over the 4; bad arguments and a grow nobody coordinates are refused. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "nccl.h"
#include "uid.h"

#define OLD 2
#define NEW 4
#define COUNT 1000

static int want_sum(int n, int j) { return n * (n + 1) / 2 + n * j; }

/* Rank r adds r+1+j at element j: the sum over n ranks is checked exactly. */
static void fill_input(int* buf, int r) {
  for (int j = 0; j < COUNT; j++) buf[j] = r + 1 + j;
}

static int check_sum(const int* buf, int r, int n, const char* what) {
  int bad = 0;
  for (int j = 0; j < COUNT; j++) {
    if (buf[j] == want_sum(n, j)) continue;
    if (bad++ < 3)
      fprintf(stderr, "FAILED %s: rank %d element %d is %d, want %d\n", what, r, j, buf[j], want_sum(n, j));
  }
  return bad;
}

/* All ranks of comms[] (driven by this thread) all-reduce in one group. */
static void check_allreduce_on(ncclComm_t* comms, int n, const char* what) {
  static int buf[NEW][COUNT];
  EXPECT_EQ_INT(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; r++) {
    fill_input(buf[r], r);
    EXPECT_EQ_INT(ncclAllReduce(buf[r], buf[r], COUNT, ncclInt32, ncclSum, comms[r], NULL), ncclSuccess);
  }
  EXPECT_MSG(ncclGroupEnd() == ncclSuccess, "%s: %s", what, ncclGetLastError(NULL));
  for (int r = 0; r < n; r++)
    if (check_sum(buf[r], r, n, what)) test_failures++;
}

static void expect_rank(ncclComm_t comm, int rank, int count, const char* what) {
  int got_rank = -1, got_count = -1;
  EXPECT_EQ_INT(ncclCommUserRank(comm, &got_rank), ncclSuccess);
  EXPECT_EQ_INT(ncclCommCount(comm, &got_count), ncclSuccess);
  EXPECT_MSG(got_rank == rank && got_count == count, "%s: rank %d of %d, want %d of %d", what, got_rank,
             got_count, rank, count);
}

static void expect_error(ncclResult_t res, ncclResult_t want, const char* text) {
  EXPECT_EQ_INT(res, want);
  const char* err = ncclGetLastError(NULL);
  EXPECT_MSG(strstr(err, text) != NULL, "expected \"%s\" in the last error: %s", text, err);
}

/* Refused before anything is exchanged: the id stays usable. */
static void bad_args(ncclComm_t* comms, const ncclUniqueId* id) {
  ncclComm_t out;
  ncclUniqueId plain, other;
  EXPECT_EQ_INT(ncclGetUniqueId(&plain), ncclSuccess);
  expect_error(ncclCommGetUniqueId(comms[0], &other), ncclInvalidUsage, "already handed out an id");
  expect_error(ncclCommGetUniqueId(comms[0], NULL), ncclInvalidArgument, "uniqueId is NULL");
  expect_error(ncclCommGrow(comms[0], NEW, id, 0, &out, NULL), ncclInvalidArgument,
               "rank 0: an existing rank passes -1");
  expect_error(ncclCommGrow(comms[0], OLD, id, -1, &out, NULL), ncclInvalidArgument,
               "nRanks 2 must be greater");
  expect_error(ncclCommGrow(comms[1], NEW, &plain, -1, &out, NULL), ncclInvalidArgument,
               "uniqueId is not the unused one");
  expect_error(ncclCommGrow(comms[0], NEW, id, -1, NULL, NULL), ncclInvalidArgument, "newcomm is NULL");
  expect_error(ncclCommGrow(NULL, NEW, NULL, 2, &out, NULL), ncclInvalidArgument,
               "uniqueId is NULL with comm NULL");
  expect_error(ncclCommGrow(NULL, NEW, &plain, 2, &out, NULL), ncclInvalidArgument,
               "did not come from ncclCommGetUniqueId");
  expect_error(ncclCommGrow(NULL, NEW, id, 1, &out, NULL), ncclInvalidArgument,
               "rank 1: a new rank takes one of 2..3");
  expect_error(ncclCommGrow(NULL, NEW, id, 4, &out, NULL), ncclInvalidArgument,
               "rank 4: a new rank takes one of 2..3");
  expect_error(ncclCommGrow(NULL, OLD, id, 2, &out, NULL), ncclInvalidArgument, "nRanks 2 must be greater");
}

/* Without the coordinator's id the existing ranks find out together, before joining anything. */
static void uncoordinated(ncclComm_t* comms) {
  ncclComm_t out[OLD] = {0};
  EXPECT_EQ_INT(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < OLD; r++)
    EXPECT_EQ_INT(ncclCommGrow(comms[r], NEW, NULL, -1, &out[r], NULL), ncclSuccess);
  expect_error(ncclGroupEnd(), ncclInvalidUsage, "no existing rank passed the uniqueId");
  for (int r = 0; r < OLD; r++) ncclCommDestroy(out[r]);
}

static void test_grow_threads(void) {
  ncclComm_t comms[OLD], grown[NEW] = {0};
  EXPECT_EQ_INT(ncclCommInitAll(comms, OLD, NULL), ncclSuccess);
  uncoordinated(comms);
  ncclUniqueId id;
  EXPECT_EQ_INT(ncclCommGetUniqueId(comms[0], &id), ncclSuccess);
  bad_args(comms, &id);
  EXPECT_EQ_INT(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < OLD; r++)
    EXPECT_EQ_INT(ncclCommGrow(comms[r], NEW, r == 0 ? &id : NULL, -1, &grown[r], NULL), ncclSuccess);
  for (int r = OLD; r < NEW; r++)
    EXPECT_EQ_INT(ncclCommGrow(NULL, NEW, &id, r, &grown[r], NULL), ncclSuccess);
  EXPECT_MSG(ncclGroupEnd() == ncclSuccess, "grow: %s", ncclGetLastError(NULL));
  for (int r = 0; r < NEW; r++) expect_rank(grown[r], r, NEW, "grown comm");
  check_allreduce_on(grown, NEW, "grow 2 -> 4 (threads)");
  check_allreduce_on(comms, OLD, "the parent after the grow");
  /* The grow used the id up: it is refused now, and a new one may be made. */
  ncclComm_t out;
  expect_error(ncclCommGrow(comms[0], NEW, &id, -1, &out, NULL), ncclInvalidArgument,
               "uniqueId is not the unused one");
  ncclUniqueId next;
  EXPECT_EQ_INT(ncclCommGetUniqueId(comms[0], &next), ncclSuccess);
  for (int r = 0; r < NEW; r++) EXPECT_EQ_INT(ncclCommDestroy(grown[r]), ncclSuccess);
  for (int r = 0; r < OLD; r++) EXPECT_EQ_INT(ncclCommDestroy(comms[r]), ncclSuccess);
}

/* ---- ranks as processes: existing ranks 0, 1 and new ranks 2, 3 ---- */

static int grow_and_check(ncclComm_t grown, int r) {
  int rank = -1, count = -1;
  ncclCommUserRank(grown, &rank);
  ncclCommCount(grown, &count);
  if (rank != r || count != NEW) {
    fprintf(stderr, "rank %d: grown comm says rank %d of %d\n", r, rank, count);
    return 1;
  }
  static int buf[COUNT];
  fill_input(buf, r);
  ncclResult_t res = ncclAllReduce(buf, buf, COUNT, ncclInt32, ncclSum, grown, NULL);
  if (res != ncclSuccess) {
    fprintf(stderr, "rank %d: all-reduce over the grown comm: %s\n", r, ncclGetLastError(grown));
    return 1;
  }
  return check_sum(buf, r, NEW, "grow 2 -> 4 (processes)") != 0;
}

static int existing_rank(ncclUniqueId id, int r, int pipe_w) {
  ncclComm_t comm, grown;
  if (ncclCommInitRank(&comm, OLD, id, r) != ncclSuccess) return 10;
  ncclUniqueId grow_id;
  if (r == 0) {
    if (ncclCommGetUniqueId(comm, &grow_id) != ncclSuccess) return 11;
    for (int i = OLD; i < NEW; i++)
      if (write(pipe_w, &grow_id, sizeof(grow_id)) != (ssize_t)sizeof(grow_id)) return 12;
  }
  ncclResult_t res = ncclCommGrow(comm, NEW, r == 0 ? &grow_id : NULL, -1, &grown, NULL);
  if (res != ncclSuccess) {
    fprintf(stderr, "existing rank %d: grow: %s\n", r, ncclGetLastError(NULL));
    return 13;
  }
  int bad = grow_and_check(grown, r);
  if (ncclCommDestroy(grown) != ncclSuccess || ncclCommDestroy(comm) != ncclSuccess) bad++;
  return bad ? 14 : 0;
}

static int new_rank(int r, int pipe_r) {
  ncclUniqueId id;
  if (read(pipe_r, &id, sizeof(id)) != (ssize_t)sizeof(id)) return 20;
  ncclComm_t grown;
  ncclResult_t res = ncclCommGrow(NULL, NEW, &id, r, &grown, NULL);
  if (res != ncclSuccess) {
    fprintf(stderr, "new rank %d: grow: %s\n", r, ncclGetLastError(NULL));
    return 21;
  }
  int bad = grow_and_check(grown, r);
  if (ncclCommDestroy(grown) != ncclSuccess) bad++;
  return bad ? 22 : 0;
}

static void test_grow_processes(void) {
  ncclUniqueId id;
  struct test_uid_holder holder; /* the root runs in a helper: no thread here when we fork */
  EXPECT_EQ_INT(test_uid_from_child(&id, &holder), ncclSuccess);
  int fds[2];
  EXPECT_EQ_INT(pipe(fds), 0);
  fflush(stdout);
  fflush(stderr);
  pid_t pids[NEW];
  for (int r = 0; r < NEW; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      alarm(120);
      _exit(r < OLD ? existing_rank(id, r, fds[1]) : new_rank(r, fds[0]));
    }
  }
  close(fds[0]);
  close(fds[1]);
  for (int r = 0; r < NEW; r++) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    EXPECT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "process rank %d: %s %d", r,
               WIFSIGNALED(status) ? "signal" : "exit status",
               WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  }
  test_uid_release(&holder);
}

int main(void) {
  setenv("WEFT_TIMEOUT", "60", 0);
  setenv("WEFT_BOOTSTRAP_TIMEOUT", "30", 0); /* a broken setup fails in seconds, not minutes */
  alarm(400);
  test_grow_threads();
  test_grow_processes();
  return test_finish("test_comm_grow");
}
