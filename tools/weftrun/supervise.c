/* weftrun: the supervisor loop. Waits on a self-pipe fed by signal handlers and on the ranks'
 * output pipes; reaps ranks, forwards signals, enforces --timeout and stops a failed job. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* for the Linux extras: CPU affinity, parent-death signal */
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "weftrun.h"

/* After the last rank exits, output still held by a stray background process is read for
 * at most this long so the launcher cannot hang on it. */
#define DRAIN_SEC 1.0
/* After --timeout, how long ranks get to write their flight-recorder dumps (SIGUSR1) before
 * SIGTERM: a dump is a few KiB per communicator, written by the library's own thread. */
#define DUMP_SEC 2.0
/* A rank that fails because a peer died can exit within microseconds of that peer, and two
 * zombies are reaped in pid order, not in the order they died: rank 0 would take the blame for
 * a killed rank 2. So the first failure is held this long before it is reported and the job
 * stopped; a rank killed by a signal in that time is the culprit rather than one that merely
 * exited non-zero (the usual reaction of a rank to a dead peer). */
#define SETTLE_SEC 0.1

/* A failed rank not yet reported (see SETTLE_SEC). */
struct suspect {
  struct weftrun_rank* rank; /* NULL if none */
  pid_t pid;
  int status;
  double report_at;
};

struct supervisor {
  struct weftrun_job* job;
  struct pollfd* fds;
  int n_alive;
  int stopping;       /* the others have been asked to stop */
  int killed;         /* SIGKILL has been sent */
  double kill_at;     /* when stopping turns into SIGKILL */
  double end_at;      /* --timeout deadline, 0 if none */
  double dump_until;  /* timed out, ranks asked for dumps: SIGTERM at this time (0: not asked) */
  double drain_until; /* set once no rank is alive */
  int exit_status;    /* -1 until the outcome is decided */
  int caught;         /* terminating signal weftrun itself received, or 0 */
  struct suspect suspect;
};

static int sig_pipe[2] = {-1, -1};

static void on_signal(int signo) {
  int saved = errno;
  unsigned char byte = (unsigned char)signo;
  (void)!write(sig_pipe[1], &byte, 1); /* full pipe: a byte is already pending */
  errno = saved;
}

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGTSTP, SIGCONT};

void weftrun_supervise_init(void) {
  if (pipe(sig_pipe) != 0) weftrun_die("pipe: %s", strerror(errno));
  for (int i = 0; i < 2; i++) {
    fcntl(sig_pipe[i], F_SETFD, FD_CLOEXEC);
    fcntl(sig_pipe[i], F_SETFL, O_NONBLOCK);
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGCHLD, &sa, NULL);
  for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++) sigaction(forwarded[i], &sa, NULL);
  /* A closed reader of our output must not kill the launcher and orphan the ranks. */
  signal(SIGPIPE, SIG_IGN);
}

static double now_sec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Signals the whole process group of each live rank, so helpers a rank forked stop too. */
static void signal_ranks(struct supervisor* sv, int signo) {
  for (int r = 0; r < sv->job->opts.n_ranks; r++)
    if (sv->job->ranks[r].pid > 0 && kill(-sv->job->ranks[r].pid, signo) != 0)
      kill(sv->job->ranks[r].pid, signo);
}

static void report_suspect(struct supervisor* sv);

static void stop_job(struct supervisor* sv, int signo, int exit_status) {
  report_suspect(sv); /* a failure seen earlier decides the outcome first */
  if (sv->exit_status < 0) sv->exit_status = exit_status;
  if (sv->stopping) return;
  sv->stopping = 1;
  sv->kill_at = now_sec() + sv->job->grace_sec;
  signal_ranks(sv, signo);
}

static void kill_job(struct supervisor* sv) {
  sv->killed = 1;
  signal_ranks(sv, SIGKILL);
}

static struct weftrun_rank* rank_of(struct weftrun_job* job, pid_t pid) {
  for (int r = 0; r < job->opts.n_ranks; r++)
    if (job->ranks[r].pid == pid) return &job->ranks[r];
  return NULL;
}

static int failed(int status) {
  return WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0);
}

/* Reports the held failure and stops the others; only the first failure is reported, since once
 * stopping, deaths are our own doing. */
static void report_suspect(struct supervisor* sv) {
  struct suspect s = sv->suspect;
  if (!s.rank) return;
  sv->suspect.rank = NULL;
  if (WIFSIGNALED(s.status)) {
    int sig = WTERMSIG(s.status);
    fprintf(stderr, "weftrun: rank %d (pid %ld) killed by signal %d (%s)\n", s.rank->rank, (long)s.pid, sig,
            strsignal(sig));
    stop_job(sv, SIGTERM, 128 + sig);
  } else {
    fprintf(stderr, "weftrun: rank %d (pid %ld) exited with status %d\n", s.rank->rank, (long)s.pid,
            WEXITSTATUS(s.status));
    stop_job(sv, SIGTERM, WEXITSTATUS(s.status));
  }
}

static void rank_exited(struct supervisor* sv, struct weftrun_rank* rank, int status) {
  pid_t pid = rank->pid;
  rank->pid = 0;
  if (--sv->n_alive == 0) sv->drain_until = now_sec() + DRAIN_SEC;
  if (sv->stopping || sv->dump_until > 0 || !failed(status)) return;
  struct suspect* s = &sv->suspect;
  int first = s->rank == NULL;
  if (first || (WIFSIGNALED(status) && !WIFSIGNALED(s->status))) {
    if (first) s->report_at = now_sec() + SETTLE_SEC;
    s->rank = rank;
    s->pid = pid;
    s->status = status;
  }
}

static void reap(struct supervisor* sv) {
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    struct weftrun_rank* rank = rank_of(sv->job, pid);
    if (rank) rank_exited(sv, rank, status);
  }
}

/* INT, TERM, HUP and QUIT end the job: forwarded once, then the grace period, and a second
 * one (an impatient Ctrl-C) kills at once. */
static void on_terminating(struct supervisor* sv, int signo) {
  if (sv->stopping) {
    if (!sv->killed) {
      fprintf(stderr, "weftrun: signal %d (%s) again, killing all ranks\n", signo, strsignal(signo));
      kill_job(sv);
    }
    return;
  }
  fprintf(stderr, "weftrun: received signal %d (%s), forwarding it to all ranks\n", signo, strsignal(signo));
  sv->caught = signo;
  stop_job(sv, signo, 128 + signo);
}

static void on_caught(struct supervisor* sv, int signo) {
  switch (signo) {
    case SIGCHLD:
      reap(sv);
      break;
    case SIGINT:
    case SIGTERM:
    case SIGHUP:
    case SIGQUIT:
      on_terminating(sv, signo);
      break;
    case SIGTSTP:
      /* Ctrl-Z: the ranks are outside the terminal's process group, so stop them
       * explicitly before stopping ourselves; SIGCONT is forwarded on resume. */
      signal_ranks(sv, SIGTSTP);
      kill(getpid(), SIGSTOP);
      break;
    default:
      signal_ranks(sv, signo);
  }
}

static void read_signals(struct supervisor* sv) {
  unsigned char bytes[64];
  ssize_t n;
  while ((n = read(sig_pipe[0], bytes, sizeof(bytes))) > 0)
    for (ssize_t i = 0; i < n; i++) on_caught(sv, bytes[i]);
}

/* Output streams still open, listed into bufs/buf_rank from index 1 (0 is the signal pipe). */
static int fill_pollfds(struct supervisor* sv, struct weftrun_tagbuf** bufs, int* buf_rank) {
  int n = 0;
  sv->fds[n].fd = sig_pipe[0];
  sv->fds[n++].events = POLLIN;
  for (int r = 0; r < sv->job->opts.n_ranks; r++)
    for (int i = 0; i < 2; i++) {
      struct weftrun_tagbuf* b = &sv->job->ranks[r].out[i];
      if (b->fd < 0) continue;
      bufs[n] = b;
      buf_rank[n] = r;
      sv->fds[n].fd = b->fd;
      sv->fds[n++].events = POLLIN;
    }
  return n;
}

static int poll_timeout_ms(const struct supervisor* sv) {
  double deadline = 0;
  if (!sv->stopping && sv->end_at > 0) deadline = sv->dump_until > 0 ? sv->dump_until : sv->end_at;
  if (sv->stopping && !sv->killed) deadline = sv->kill_at;
  if (sv->suspect.rank && (deadline == 0 || sv->suspect.report_at < deadline))
    deadline = sv->suspect.report_at;
  if (sv->n_alive == 0 && (deadline == 0 || sv->drain_until < deadline)) deadline = sv->drain_until;
  if (deadline == 0) return -1;
  double ms = (deadline - now_sec()) * 1000.0 + 1.0; /* +1: never wake just before it */
  return ms < 0 ? 0 : ms > 3600e3 ? 3600000 : (int)ms;
}

/* A hung job's ranks hold the evidence: with the flight recorder on (WEFT_TRACE_DIR, which the
 * ranks inherit), each is asked for its dump (SIGUSR1) before the job is stopped, so weft-trace
 * can name the rank at fault. */
static void timed_out(struct supervisor* sv, double now) {
  const char* dir = getenv("WEFT_TRACE_DIR");
  const char* sig = getenv("WEFT_TRACE_SIGNALS");
  int dumps = dir && dir[0] && !(sig && strcmp(sig, "0") == 0);
  if (sv->dump_until == 0 && dumps) {
    fprintf(stderr,
            "weftrun: job timed out after %g seconds; asking the ranks for their flight-recorder dumps "
            "(SIGUSR1, into %s; read them with weft-trace %s), stopping them in %g s\n",
            sv->job->opts.timeout_sec, dir, dir, DUMP_SEC);
    sv->exit_status = WEFTRUN_TIMEOUT_EXIT;
    sv->dump_until = now + DUMP_SEC;
    signal_ranks(sv, SIGUSR1);
    return;
  }
  if (sv->dump_until > now) return;
  if (sv->dump_until == 0)
    fprintf(stderr, "weftrun: job timed out after %g seconds\n", sv->job->opts.timeout_sec);
  stop_job(sv, SIGTERM, WEFTRUN_TIMEOUT_EXIT);
}

static void check_deadlines(struct supervisor* sv) {
  double now = now_sec();
  if (sv->suspect.rank && now >= sv->suspect.report_at) report_suspect(sv);
  if (!sv->stopping && sv->end_at > 0 && now >= sv->end_at) timed_out(sv, now);
  if (sv->stopping && !sv->killed && now >= sv->kill_at && sv->n_alive > 0) kill_job(sv);
}

static int outputs_open(const struct supervisor* sv) {
  for (int r = 0; r < sv->job->opts.n_ranks; r++)
    if (sv->job->ranks[r].out[0].fd >= 0 || sv->job->ranks[r].out[1].fd >= 0) return 1;
  return 0;
}

static void close_outputs(struct supervisor* sv) {
  for (int r = 0; r < sv->job->opts.n_ranks; r++)
    for (int i = 0; i < 2; i++)
      if (sv->job->ranks[r].out[i].fd >= 0) weftrun_tag_close(&sv->job->ranks[r].out[i], r);
}

static void poll_once(struct supervisor* sv, struct weftrun_tagbuf** bufs, int* buf_rank) {
  int n = fill_pollfds(sv, bufs, buf_rank);
  int rc = poll(sv->fds, n, poll_timeout_ms(sv));
  if (rc < 0 && errno != EINTR) weftrun_die("poll: %s", strerror(errno));
  if (rc > 0 && sv->fds[0].revents) read_signals(sv);
  for (int i = 1; rc > 0 && i < n; i++)
    if (sv->fds[i].revents & (POLLIN | POLLHUP | POLLERR)) weftrun_tag_read(bufs[i], buf_rank[i]);
}

/* A job ended by a signal to weftrun ends weftrun by the same signal, so a calling shell
 * sees an interrupted command (and, for Ctrl-C, stops its own loop) rather than an exit code. */
static int outcome(struct supervisor* sv) {
  int s = sv->caught;
  if (s && sv->exit_status == 128 + s && (s == SIGINT || s == SIGTERM || s == SIGHUP)) {
    fflush(NULL);
    signal(s, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, s);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(s);
  }
  return sv->exit_status < 0 ? 0 : sv->exit_status;
}

int weftrun_supervise_run(struct weftrun_job* job, int n_started) {
  int n = job->opts.n_ranks;
  struct supervisor sv = {.job = job, .n_alive = n_started, .exit_status = -1};
  struct weftrun_tagbuf** bufs = calloc(1 + 2 * (size_t)n, sizeof(*bufs));
  int* buf_rank = calloc(1 + 2 * (size_t)n, sizeof(*buf_rank));
  sv.fds = calloc(1 + 2 * (size_t)n, sizeof(*sv.fds));
  if (!bufs || !buf_rank || !sv.fds) weftrun_die("out of memory");
  if (job->opts.timeout_sec > 0) sv.end_at = now_sec() + job->opts.timeout_sec;
  if (n_started < n) stop_job(&sv, SIGTERM, 1);
  if (n_started == 0) sv.drain_until = now_sec();
  while (sv.n_alive > 0 || (outputs_open(&sv) && now_sec() < sv.drain_until)) {
    poll_once(&sv, bufs, buf_rank);
    check_deadlines(&sv);
  }
  report_suspect(&sv); /* every rank ended before the settling time did */
  close_outputs(&sv);
  free(bufs);
  free(buf_rank);
  free(sv.fds);
  return outcome(&sv);
}
