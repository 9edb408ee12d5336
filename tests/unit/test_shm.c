/* Shared-memory segments and connector memory: a segment created by one process is mapped by
 * another (a give-up cause written there crosses too), no segment ever has a name in /dev/shm, none
 * can be opened once unshared, and a request larger than /dev/shm's free space fails with a message
 * saying how much was needed and how to raise it. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "core/comm.h"
#include "transport/connector.h"
#include "util/log.h"

/* Entries of /dev/shm a process with this pid could have made (weft-<tag>-<pid>-<n>). */
static int shm_names_of(pid_t pid) {
  char part[32];
  snprintf(part, sizeof(part), "-%d-", (int)pid);
  DIR* d = opendir("/dev/shm");
  int n = 0;
  if (d == NULL) return 0;
  for (struct dirent* e; (e = readdir(d)) != NULL;)
    n += !strncmp(e->d_name, "weft-", 5) && strstr(e->d_name, part);
  closedir(d);
  return n;
}

/* Whether another process can attach the connector h describes. */
static int peer_attaches(const struct weft_conn_handle* h) {
  pid_t pid = fork();
  if (pid == 0) {
    struct weft_conn_mem* m = NULL;
    if (weft_conn_mem_attach(h, &m) != ncclSuccess) _exit(3);
    weft_conn_mem_release(m);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(void) {
  struct weft_conn_mem* owner = NULL;
  struct weft_conn_handle h;
  EXPECT(weft_conn_mem_create(64 * 1024, 32 * 1024, 1, "test", &owner, &h) == ncclSuccess);
  EXPECT(h.is_shm && shm_names_of(getpid()) == 0);
  struct weft_conn own;
  weft_conn_bind(&own, owner, 1);
  EXPECT_EQ_INT(own.simple_slot, 64 * 1024 / WEFT_NSTEPS);
  /* Another process attaches, writes a step into the FIFO and posts tail. */
  pid_t pid = fork();
  if (pid == 0) {
    struct weft_conn_mem* m = NULL;
    if (weft_conn_mem_attach(&h, &m) != ncclSuccess) _exit(2);
    struct weft_conn c;
    weft_conn_bind(&c, m, 0);
    memcpy(c.simple, "hello", 6);
    weft_cause_set(&c.ctrl->cause[0], 5, "hostB, 10.0.0.2"); /* as a sender giving up would */
    __atomic_store_n(&c.ctrl->tail, 1, __ATOMIC_RELEASE);
    weft_conn_mem_release(m);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT(__atomic_load_n(&own.ctrl->tail, __ATOMIC_ACQUIRE) == 1 && strcmp(own.simple, "hello") == 0);
  /* The peer's cause crossed processes; the first cause recorded stays. */
  struct weft_cause got;
  EXPECT(weft_cause_get(&own.ctrl->cause[0], &got) && got.rank == 5 &&
         strcmp(got.host, "hostB, 10.0.0.2") == 0);
  EXPECT(!weft_cause_get(&own.ctrl->cause[1], &got));
  EXPECT(!weft_cause_set(&own.ctrl->cause[0], 7, "other"));
  EXPECT(weft_cause_get(&own.ctrl->cause[0], &got) && got.rank == 5);
  char long_host[300];
  memset(long_host, 'h', sizeof(long_host) - 1);
  long_host[sizeof(long_host) - 1] = 0;
  EXPECT(weft_cause_set(&own.ctrl->cause[1], 0, long_host));
  EXPECT(weft_cause_get(&own.ctrl->cause[1], &got) && got.rank == 0 &&
         strlen(got.host) == sizeof(got.host) - 1);
  EXPECT(peer_attaches(&h));
  weft_conn_mem_unlink(owner);
  EXPECT(!peer_attaches(&h));
  EXPECT_EQ_INT(shm_names_of(getpid()), 0);
  weft_conn_mem_release(owner);
  weft_conn_mem_release(NULL);

  /* Too large for /dev/shm: a clear error, and nothing left behind. */
  struct statvfs st;
  if (statvfs("/dev/shm", &st) == 0) {
    size_t too_big = (size_t)st.f_bavail * st.f_frsize + (1ull << 30);
    struct weft_shm_seg seg;
    EXPECT(weft_shm_create("big", too_big, &seg) == ncclSystemError);
    const char* text = weft_log_last_error();
    EXPECT_MSG(text && strstr(text, "--shm-size") && strstr(text, "bytes"), "%s", text ? text : "(none)");
    EXPECT_EQ_INT(shm_names_of(getpid()), 0);
  }
  return test_finish("shm");
}
