/* Unique ids from a helper process (see uid.h). */
#include "uid.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

ncclResult_t test_uid_from_child(ncclUniqueId* id, struct test_uid_holder* holder) {
  int to_parent[2], to_child[2];
  holder->pid = -1;
  holder->fd = -1;
  if (pipe(to_parent) != 0) return ncclSystemError;
  if (pipe(to_child) != 0) {
    close(to_parent[0]);
    close(to_parent[1]);
    return ncclSystemError;
  }
  pid_t pid = fork();
  if (pid == 0) {
    close(to_parent[0]);
    close(to_child[1]);
    ncclUniqueId mine;
    ncclResult_t res = ncclGetUniqueId(&mine);
    ssize_t n = write(to_parent[1], &res, sizeof(res));
    if (res == ncclSuccess) n = write(to_parent[1], &mine, sizeof(mine));
    (void)n;
    char byte;
    while (read(to_child[0], &byte, 1) > 0) continue; /* until released: the root serves the ranks */
    _exit(0);
  }
  close(to_parent[1]);
  close(to_child[0]);
  ncclResult_t res = ncclSystemError;
  if (pid < 0 || read(to_parent[0], &res, sizeof(res)) != sizeof(res) ||
      (res == ncclSuccess && read(to_parent[0], id, sizeof(*id)) != sizeof(*id)))
    res = ncclSystemError;
  close(to_parent[0]);
  holder->pid = pid;
  holder->fd = to_child[1];
  return res;
}

void test_uid_release(struct test_uid_holder* holder) {
  if (holder->fd >= 0) close(holder->fd);
  if (holder->pid > 0) waitpid(holder->pid, NULL, 0);
  holder->fd = holder->pid = -1;
}
