/* weftrun: --tag-output. Splits a rank's captured stdout or stderr into lines and writes
 * each as one "[rank] line" write, so lines of different ranks never mix. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* for the Linux extras: CPU affinity, parent-death signal */
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "weftrun.h"

/* Returns -1 if the reader has gone away (EPIPE: the launcher ignores SIGPIPE). */
static int write_all(int fd, const char* data, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, data, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    data += n;
    len -= (size_t)n;
  }
  return 0;
}

void weftrun_tag_init(struct weftrun_tagbuf* buf, int fd, int out_fd) {
  buf->fd = fd;
  buf->out_fd = out_fd;
  buf->mid_line = 0;
  buf->out_broken = 0;
  buf->len = 0;
  buf->data = malloc(WEFTRUN_TAG_LINE_BYTES);
  if (!buf->data) weftrun_die("out of memory");
}

/* One write per line; the prefix is left out when continuing a line that was too long
 * for the buffer and had to be flushed early. */
static void emit(struct weftrun_tagbuf* buf, int rank, const char* line, size_t len, int add_newline) {
  char prefix[24];
  int plen = buf->mid_line ? 0 : snprintf(prefix, sizeof(prefix), "[%d] ", rank);
  char* out = malloc(plen + len + 1);
  if (!out) return;
  memcpy(out, prefix, plen);
  memcpy(out + plen, line, len);
  if (add_newline) out[plen + len++] = '\n';
  if (!buf->out_broken && write_all(buf->out_fd, out, plen + len) != 0) buf->out_broken = 1;
  free(out);
}

/* Writes every complete line in the buffer and keeps the unfinished rest. */
static void flush_lines(struct weftrun_tagbuf* buf, int rank) {
  size_t start = 0;
  for (char* nl; (nl = memchr(buf->data + start, '\n', buf->len - start));) {
    size_t end = (size_t)(nl - buf->data) + 1;
    emit(buf, rank, buf->data + start, end - start, 0);
    buf->mid_line = 0;
    start = end;
  }
  memmove(buf->data, buf->data + start, buf->len - start);
  buf->len -= start;
  if (buf->len == WEFTRUN_TAG_LINE_BYTES) {
    emit(buf, rank, buf->data, buf->len, 0);
    buf->mid_line = 1;
    buf->len = 0;
  }
}

void weftrun_tag_close(struct weftrun_tagbuf* buf, int rank) {
  /* A last line without its newline still gets one, so the next tag starts a line. */
  if (buf->len > 0) emit(buf, rank, buf->data, buf->len, 1);
  close(buf->fd);
  buf->fd = -1;
  buf->len = 0;
  free(buf->data);
  buf->data = NULL;
}

int weftrun_tag_read(struct weftrun_tagbuf* buf, int rank) {
  ssize_t n = read(buf->fd, buf->data + buf->len, WEFTRUN_TAG_LINE_BYTES - buf->len);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return 1;
  if (n <= 0) {
    weftrun_tag_close(buf, rank);
    return 0;
  }
  buf->len += (size_t)n;
  flush_lines(buf, rank);
  if (buf->out_broken) {
    /* Closing our end passes the broken pipe on: the rank gets SIGPIPE on its next write,
     * just as it would writing to `weftrun ... | head` without --tag-output. */
    buf->len = 0;
    weftrun_tag_close(buf, rank);
    return 0;
  }
  return 1;
}
