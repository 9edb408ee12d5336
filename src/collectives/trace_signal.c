/* Dumps on signals. With WEFT_TRACE_DIR set, SIGUSR1 (and fatal signals, where the process left
 * them at their default) make every live communicator of the process write its dump. The handler
 * only writes one byte to a pipe: a dedicated thread, woken by it, does the writing, since a
 * handler may not allocate or take locks. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collectives/context.h"
#include "collectives/trace.h"
#include "util/log.h"
#include "util/param.h"

void weft_trace_signals_add(struct weft_trace* tr);
void weft_trace_signals_remove(struct weft_trace* tr);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* the list, and a dump of it */
static struct weft_trace* traces;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int wake_fd[2] = {-1, -1};
static volatile sig_atomic_t fatal_done; /* dumps written after a fatal signal's wake-up */

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define NFATAL (int)(sizeof(fatal_signals) / sizeof(fatal_signals[0]))
static struct sigaction fatal_prev[NFATAL];

static void dump_all(enum weft_trace_reason why) {
  pthread_mutex_lock(&lock);
  for (struct weft_trace* t = traces; t; t = t->next) weft_trace_dump(t->comm, NULL, why, 0);
  pthread_mutex_unlock(&lock);
}

static void* dumper_main(void* arg) {
  (void)arg;
  for (;;) {
    char c;
    ssize_t n = read(wake_fd[0], &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return NULL;
    dump_all(c == 'F' ? WEFT_TRACE_ON_FATAL : WEFT_TRACE_ON_SIGNAL);
    if (c == 'F') fatal_done = 1;
  }
}

static void on_usr1(int sig) {
  (void)sig;
  int saved = errno;
  char c = 'U';
  if (write(wake_fd[1], &c, 1) < 0) { /* nothing a handler could do about it */
  }
  errno = saved;
}

/* Wake the dumper, give it a bounded time (it may need a lock the crashed thread holds), then
 * let the signal do what it would have done. */
static void on_fatal(int sig) {
  char c = 'F';
  if (write(wake_fd[1], &c, 1) == 1) {
    for (int i = 0; i < 200 && !fatal_done; i++) {
      struct timespec ts = {0, 10000000};
      nanosleep(&ts, NULL);
    }
  }
  for (int i = 0; i < NFATAL; i++)
    if (fatal_signals[i] == sig) sigaction(sig, &fatal_prev[i], NULL);
  raise(sig);
}

/* Handlers only replace default dispositions: a program's (or a framework's) own stay. */
static void install(int sig, void (*fn)(int), struct sigaction* prev) {
  struct sigaction old;
  if (sigaction(sig, NULL, &old) != 0 || old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO)) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = fn;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (sigaction(sig, &sa, NULL) == 0 && prev) *prev = old;
}

static void setup(void) {
  if (pipe(wake_fd) != 0) {
    WEFT_WARN("flight recorder: pipe failed (%s); no dumps on signals", strerror(errno));
    return;
  }
  pthread_t th;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  /* Signals go to other threads: this one only writes files. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int err = pthread_create(&th, &attr, dumper_main, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  if (err != 0) {
    WEFT_WARN("flight recorder: cannot start the dump thread (%s); no dumps on signals", strerror(err));
    return;
  }
  if (weft_param_int("WEFT_TRACE_SIGNALS") == 0) return;
  install(SIGUSR1, on_usr1, NULL);
  for (int i = 0; i < NFATAL; i++) install(fatal_signals[i], on_fatal, &fatal_prev[i]);
}

void weft_trace_signals_add(struct weft_trace* tr) {
  pthread_once(&once, setup);
  pthread_mutex_lock(&lock);
  tr->next = traces;
  traces = tr;
  pthread_mutex_unlock(&lock);
}

void weft_trace_signals_remove(struct weft_trace* tr) {
  pthread_mutex_lock(&lock);
  for (struct weft_trace** p = &traces; *p; p = &(*p)->next)
    if (*p == tr) {
      *p = tr->next;
      break;
    }
  pthread_mutex_unlock(&lock);
}
