/* Shared-memory segments for connectors between processes of one host. A segment never has a
 * name: it is an unnamed file in WEFT_SHM_DIR (O_TMPFILE, else memfd) that peers open through
 * /proc/<pid>/fd/<fd> while the creator keeps that descriptor open, so a rank killed at any
 * moment (kill -9 included) leaves nothing in /dev/shm. Space is reserved with posix_fallocate
 * so a full /dev/shm gives an error naming the size instead of a SIGBUS on first touch. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "transport/connector.h"
#include "util/check.h"
#include "util/log.h"
#include "util/param.h"

static const char* shm_dir(void) {
  const char* dir = weft_param_str("WEFT_SHM_DIR");
  return dir && *dir ? dir : "/dev/shm";
}

static void warn_space(size_t size, int err) {
  struct statvfs st;
  unsigned long long avail = 0;
  if (statvfs(shm_dir(), &st) == 0) avail = (unsigned long long)st.f_bavail * st.f_frsize;
  WEFT_WARN(
      "A shared memory segment needs %zu bytes but %s has %llu bytes free (%s); raise its size, "
      "e.g. docker run --shm-size=1g, or mount -o remount,size=1G /dev/shm, or lower NCCL_BUFFSIZE "
      "(weft-doctor check shm.size: weft-doctor --ranks N says how much N ranks of this host need)",
      size, shm_dir(), avail, strerror(err));
}

/* NCCL_SHM_DISABLE=1 keeps Weft out of the shm directory (users set it where /dev/shm is small, as
 * in containers): connectors then go through the network (transport/transport.c), and what must
 * still be shared (ncclMemAlloc buffers, boards, signals: the counterparts of the GPU memory that
 * NCCL shares whatever NCCL_SHM_DISABLE says) is a memfd, outside that directory's size limit. */
static int shm_dir_off(void) { return weft_param_int("NCCL_SHM_DISABLE") != 0; }

/* An unnamed file: in the shm directory, so that its size limit applies as for named segments,
 * or as a memfd where that directory's file system has no O_TMPFILE or it is off. */
static int open_unnamed(const char* tag) {
  int fd = shm_dir_off() ? -1 : open(shm_dir(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  int err = shm_dir_off() ? 0 : errno;
  char name[64];
  snprintf(name, sizeof(name), "weft-%s", tag);
  fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0)
    WEFT_WARN("Creating a shared memory segment failed: open(%s, O_TMPFILE): %s; memfd_create: %s", shm_dir(),
              strerror(err), strerror(errno));
  return fd;
}

static ncclResult_t size_and_map(int fd, size_t size, void** out) {
  int err = ftruncate(fd, (off_t)size) < 0 ? errno : 0;
  if (err == 0) err = posix_fallocate(fd, 0, (off_t)size);
  if (err != 0) {
    if (err == ENOSPC || err == EFBIG)
      warn_space(size, err);
    else
      WEFT_WARN("Sizing a shared memory segment to %zu bytes failed: %s", size, strerror(err));
    return ncclSystemError;
  }
  void* p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    WEFT_WARN("mmap of a shared memory segment (%zu bytes) failed: %s", size, strerror(errno));
    return ncclSystemError;
  }
  *out = p;
  return ncclSuccess;
}

ncclResult_t weft_shm_create(const char* tag, size_t size, struct weft_shm_seg* seg) {
  memset(seg, 0, sizeof(*seg));
  seg->fd = -1;
  /* Refuse up front what cannot fit rather than filling the file system to find out. */
  struct statvfs st;
  if (!shm_dir_off() && statvfs(shm_dir(), &st) == 0 &&
      (unsigned long long)st.f_bavail * st.f_frsize < size) {
    warn_space(size, ENOSPC);
    return ncclSystemError;
  }
  int fd = open_unnamed(tag);
  if (fd < 0) return ncclSystemError;
  void* p = NULL;
  if (size_and_map(fd, size, &p) != ncclSuccess) {
    close(fd);
    return ncclSystemError;
  }
  seg->ptr = p;
  seg->size = size;
  seg->fd = fd;
  snprintf(seg->name, sizeof(seg->name), "/proc/%d/fd/%d", (int)getpid(), fd);
  WEFT_INFO(WEFT_SHM, "Created shared memory segment %s (%s) of %zu bytes", seg->name, tag, size);
  return ncclSuccess;
}

ncclResult_t weft_shm_open(const char* name, size_t size, struct weft_shm_seg* seg) {
  memset(seg, 0, sizeof(*seg));
  seg->fd = -1;
  snprintf(seg->name, sizeof(seg->name), "%s", name);
  int fd = open(name, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    WEFT_WARN(
        "Opening a peer's shared memory segment %s failed: %s (the peer exited, or runs in another PID "
        "namespace or without /proc: weft-doctor check ptrace.procfd)",
        name, strerror(errno));
    return ncclSystemError;
  }
  struct stat st;
  if (fstat(fd, &st) < 0 || (size_t)st.st_size < size) {
    WEFT_WARN("Peer's shared memory segment %s has %lld bytes, expected %zu", name, (long long)st.st_size,
              size);
    close(fd);
    return ncclSystemError;
  }
  void* p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (p == MAP_FAILED) {
    WEFT_WARN("mmap of peer's shared memory segment %s (%zu bytes) failed: %s", name, size, strerror(err));
    return ncclSystemError;
  }
  seg->ptr = p;
  seg->size = size;
  return ncclSuccess;
}

void weft_shm_unshare(struct weft_shm_seg* seg) {
  if (seg == NULL || seg->fd < 0) return;
  close(seg->fd);
  seg->fd = -1;
}

void weft_shm_close(struct weft_shm_seg* seg) {
  if (seg == NULL) return;
  weft_shm_unshare(seg);
  if (seg->ptr == NULL) return;
  munmap(seg->ptr, seg->size);
  seg->ptr = NULL;
}
