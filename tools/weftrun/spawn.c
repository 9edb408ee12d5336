/* weftrun: starting one rank. A local rank is forked, given its environment, GPU and CPU
 * binding, and exec'd; a rank on another host is an ssh child that runs `env VAR=... prog`. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* for the Linux extras: CPU affinity, parent-death signal */
#endif
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "weftrun.h"

extern char** environ;

typedef void (*env_emit_fn)(const char* name, const char* value, void* ctx);

static int count_dir(const char* path, const char* prefix) {
  DIR* d = opendir(path);
  int n = 0;
  if (!d) return 0;
  size_t plen = strlen(prefix);
  for (struct dirent* e; (e = readdir(d));) {
    if (e->d_name[0] == '.' || strncmp(e->d_name, prefix, plen)) continue;
    /* /dev/nvidiactl and /dev/nvidia-uvm are not GPUs; /dev/nvidia0 is. */
    if (plen && !isdigit((unsigned char)e->d_name[plen])) continue;
    n++;
  }
  closedir(d);
  return n;
}

int weftrun_spawn_count_gpus(void) {
  int n = count_dir("/proc/driver/nvidia/gpus", "");
  return n ? n : count_dir("/dev", "nvidia");
}

/* Item (index mod count) of a comma-separated list, written into out. */
static void pick_from_list(const char* list, int index, char* out, size_t out_len) {
  int count = 1;
  for (const char* p = list; *p; p++) count += *p == ',';
  const char* item = list;
  for (int i = index % count; i > 0; i--) item = strchr(item, ',') + 1;
  size_t len = strcspn(item, ",");
  snprintf(out, out_len, "%.*s", (int)len, item);
}

/* CUDA_VISIBLE_DEVICES for a rank, or NULL to leave the environment alone. A list the user
 * set is respected by choosing from it, so `CUDA_VISIBLE_DEVICES=2,3 weftrun -n 2` works. */
static const char* gpu_for(struct weftrun_job* job, struct weftrun_rank* rank, char* buf, size_t len) {
  const char* user = getenv("CUDA_VISIBLE_DEVICES");
  if (user) {
    if (!*user) return NULL;
    pick_from_list(user, rank->local_rank, buf, len);
    return buf;
  }
  /* Remote hosts cannot be probed from here; clusters are usually homogeneous. */
  if (job->n_gpus <= 0) return NULL;
  snprintf(buf, len, "%d", rank->local_rank % job->n_gpus);
  return buf;
}

static void rank_env(struct weftrun_job* job, struct weftrun_rank* rank, env_emit_fn emit, void* ctx) {
  char v[96];
  snprintf(v, sizeof(v), strchr(job->root_addr, ':') ? "[%s]:%d" : "%s:%d", job->root_addr, job->root_port);
  emit("NCCL_COMM_ID", v, ctx);
  emit("MASTER_ADDR", job->root_addr, ctx);
  snprintf(v, sizeof(v), "%d", job->root_port);
  emit("MASTER_PORT", v, ctx);
  snprintf(v, sizeof(v), "%d", rank->rank);
  emit("WEFT_RANK", v, ctx);
  emit("RANK", v, ctx);
  snprintf(v, sizeof(v), "%d", job->opts.n_ranks);
  emit("WEFT_NRANKS", v, ctx);
  emit("WORLD_SIZE", v, ctx);
  snprintf(v, sizeof(v), "%d", rank->local_rank);
  emit("WEFT_LOCAL_RANK", v, ctx);
  emit("LOCAL_RANK", v, ctx);
  snprintf(v, sizeof(v), "%d", rank->host->n_placed);
  emit("WEFT_LOCAL_NRANKS", v, ctx);
  emit("LOCAL_WORLD_SIZE", v, ctx);
  const char* gpu = gpu_for(job, rank, v, sizeof(v));
  if (gpu) emit("CUDA_VISIBLE_DEVICES", gpu, ctx);
}

static void emit_setenv(const char* name, const char* value, void* ctx) {
  (void)ctx;
  if (setenv(name, value, 1) != 0) fprintf(stderr, "weftrun: cannot set %s: %s\n", name, strerror(errno));
}

/* Growable string for the remote command line. Only ever used in the forked child. */
struct strbuf {
  char* data;
  size_t len, cap;
};

static void sb_add(struct strbuf* sb, const char* s, size_t n) {
  if (sb->len + n + 1 > sb->cap) {
    sb->cap = (sb->len + n + 1) * 2;
    sb->data = realloc(sb->data, sb->cap);
    if (!sb->data) _exit(127);
  }
  memcpy(sb->data + sb->len, s, n);
  sb->len += n;
  sb->data[sb->len] = '\0';
}

/* Single quotes survive every common login shell; an embedded quote becomes '\''. */
static void sb_add_quoted(struct strbuf* sb, const char* s) {
  sb_add(sb, " '", 2);
  for (const char* q; (q = strchr(s, '\'')); s = q + 1) {
    sb_add(sb, s, q - s);
    sb_add(sb, "'\\''", 4);
  }
  sb_add(sb, s, strlen(s));
  sb_add(sb, "'", 1);
}

static void emit_quoted(const char* name, const char* value, void* ctx) {
  struct strbuf* sb = ctx;
  struct strbuf pair = {0};
  sb_add(&pair, name, strlen(name));
  sb_add(&pair, "=", 1);
  sb_add(&pair, value, strlen(value));
  sb_add_quoted(sb, pair.data);
  free(pair.data);
}

/* `cd <cwd> && exec env [NCCL_*, WEFT_* of ours] [rank vars] prog args`: the library's
 * settings travel with the job as they would locally, and later assignments win. */
static char* remote_command(struct weftrun_job* job, struct weftrun_rank* rank) {
  struct strbuf sb = {0};
  char cwd[4096];
  if (getcwd(cwd, sizeof(cwd))) {
    sb_add(&sb, "cd", 2);
    sb_add_quoted(&sb, cwd);
    sb_add(&sb, " &&", 3);
  }
  sb_add(&sb, " exec env", 9);
  for (char** e = environ; *e; e++)
    if (!strncmp(*e, "NCCL_", 5) || !strncmp(*e, "WEFT_", 5)) sb_add_quoted(&sb, *e);
  rank_env(job, rank, emit_quoted, &sb);
  for (char** a = job->opts.argv; *a; a++) sb_add_quoted(&sb, *a);
  return sb.data;
}

/* WEFTRUN_SSH may hold options ("ssh -tt" makes remote ranks die with the session). */
static void exec_ssh(struct weftrun_job* job, struct weftrun_rank* rank) {
  const char* ssh = getenv("WEFTRUN_SSH");
  char* words = strdup(ssh && *ssh ? ssh : "ssh");
  char *argv[64], *save = NULL;
  int n = 0;
  for (char* w = strtok_r(words, " \t", &save); w && n < 60; w = strtok_r(NULL, " \t", &save)) argv[n++] = w;
  if (n == 0) argv[n++] = "ssh";
  argv[n++] = rank->host->name;
  argv[n++] = remote_command(job, rank);
  argv[n] = NULL;
  execvp(argv[0], argv);
  fprintf(stderr, "weftrun: rank %d: cannot run '%s': %s\n", rank->rank, argv[0], strerror(errno));
  _exit(127);
}

/* Undo what the launcher set up for itself: caught signals would run our handler (and
 * write to our self-pipe) until exec, and an ignored SIGPIPE or the blocked mask left by
 * weftrun_spawn_rank would be inherited by the program. */
static void child_reset_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  for (int s = 1; s < NSIG; s++) sigaction(s, &sa, NULL); /* fails harmlessly for SIGKILL, SIGSTOP, RT gaps */
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
}

/* Own process group: the launcher can signal a rank and everything it forked at once,
 * and a terminal's Ctrl-C reaches only weftrun, which forwards it exactly once. */
static void child_detach(pid_t launcher) {
  setpgid(0, 0);
#ifdef __linux__
  /* If weftrun itself is SIGKILLed it cannot clean up; let the kernel do it. */
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != launcher) _exit(1);
#else
  (void)launcher;
#endif
}

/* Rank 0 keeps a piped or redirected stdin; a terminal stays with weftrun because a
 * background process group reading it would be stopped by SIGTTIN. */
static void child_stdio(struct weftrun_rank* rank, int pipes[2][2]) {
  if (rank->rank != 0 || isatty(0)) {
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0 && null != 0) {
      dup2(null, 0);
      close(null);
    }
  }
  for (int i = 0; i < 2; i++)
    if (pipes[i][1] >= 0) dup2(pipes[i][1], i + 1); /* dup2 clears close-on-exec on the copy */
}

static void child_exec(struct weftrun_job* job, struct weftrun_rank* rank, int pipes[2][2], pid_t launcher) {
  child_reset_signals();
  child_detach(launcher);
  child_stdio(rank, pipes);
  if (!rank->host->local) exec_ssh(job, rank);
  rank_env(job, rank, emit_setenv, NULL);
  weftrun_bind_self(job, rank);
  execvp(job->opts.argv[0], job->opts.argv);
  fprintf(stderr, "weftrun: rank %d: cannot run '%s': %s\n", rank->rank, job->opts.argv[0], strerror(errno));
  _exit(errno == ENOENT ? 127 : 126); /* the shell's codes for not found / not executable */
}

/* Close-on-exec keeps later ranks from holding earlier ranks' pipes open, which would
 * delay end-of-file until every rank has exited. */
static int open_pipes(int pipes[2][2]) {
  for (int i = 0; i < 2; i++) {
    if (pipe(pipes[i]) != 0) {
      fprintf(stderr, "weftrun: pipe: %s\n", strerror(errno));
      return -1;
    }
    fcntl(pipes[i][0], F_SETFD, FD_CLOEXEC);
    fcntl(pipes[i][1], F_SETFD, FD_CLOEXEC);
  }
  return 0;
}

static void close_pipes(int pipes[2][2], int end) {
  for (int i = 0; i < 2; i++)
    if (pipes[i][end] >= 0) close(pipes[i][end]);
}

int weftrun_spawn_rank(struct weftrun_job* job, struct weftrun_rank* rank) {
  int pipes[2][2] = {{-1, -1}, {-1, -1}};
  if (job->opts.tag_output && open_pipes(pipes) != 0) {
    close_pipes(pipes, 0);
    close_pipes(pipes, 1);
    return -1;
  }
  fflush(NULL); /* or buffered launcher output would be written twice */
  /* Blocked until the child has reset its handlers, so a signal in between cannot run our
   * handler in the child and feed a false event into the launcher's signal pipe. */
  sigset_t all, old;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &old);
  pid_t launcher = getpid();
  pid_t pid = fork();
  if (pid == 0) child_exec(job, rank, pipes, launcher);
  sigprocmask(SIG_SETMASK, &old, NULL);
  close_pipes(pipes, 1);
  if (pid < 0) {
    fprintf(stderr, "weftrun: cannot start rank %d: %s\n", rank->rank, strerror(errno));
    close_pipes(pipes, 0);
    return -1;
  }
  /* Also set here: whichever of parent and child runs first, the group exists before
   * the supervisor may signal it. */
  setpgid(pid, pid);
  rank->pid = pid;
  for (int i = 0; i < 2 && pipes[i][0] >= 0; i++) {
    fcntl(pipes[i][0], F_SETFL, O_NONBLOCK);
    weftrun_tag_init(&rank->out[i], pipes[i][0], i + 1);
  }
  return 0;
}
