/* POSIX shared-memory segments for connectors between processes of one host. Space is
 * reserved with posix_fallocate so a full /dev/shm gives an error naming the size instead of
 * a SIGBUS on first touch. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
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

static atomic_uint seg_counter;

static void warn_space(const char* name, size_t size, int err) {
  const char* dir = weft_param_str("WEFT_SHM_DIR");
  struct statvfs st;
  unsigned long long avail = 0;
  if (dir && statvfs(dir, &st) == 0) avail = (unsigned long long)st.f_bavail * st.f_frsize;
  WEFT_WARN(
      "Shared memory segment %s needs %zu bytes but %s has %llu bytes free (%s); raise its size, "
      "e.g. docker run --shm-size=1g, or mount -o remount,size=1G /dev/shm, or lower NCCL_BUFFSIZE",
      name, size, dir ? dir : "/dev/shm", avail, strerror(err));
}

ncclResult_t weft_shm_create(const char* tag, size_t size, struct weft_shm_seg* seg) {
  memset(seg, 0, sizeof(*seg));
  snprintf(seg->name, sizeof(seg->name), "/weft-%s-%d-%u", tag, (int)getpid(),
           atomic_fetch_add(&seg_counter, 1));
  /* Refuse up front what cannot fit rather than filling the file system to find out. */
  const char* dir = weft_param_str("WEFT_SHM_DIR");
  struct statvfs st;
  if (dir && statvfs(dir, &st) == 0 && (unsigned long long)st.f_bavail * st.f_frsize < size) {
    warn_space(seg->name, size, ENOSPC);
    return ncclSystemError;
  }
  int fd = shm_open(seg->name, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    WEFT_WARN("shm_open(%s) failed: %s", seg->name, strerror(errno));
    return ncclSystemError;
  }
  int err = ftruncate(fd, (off_t)size) < 0 ? errno : 0;
  if (err == 0) err = posix_fallocate(fd, 0, (off_t)size);
  if (err != 0) {
    if (err == ENOSPC || err == EFBIG)
      warn_space(seg->name, size, err);
    else
      WEFT_WARN("Sizing shared memory segment %s to %zu bytes failed: %s", seg->name, size, strerror(err));
    close(fd);
    shm_unlink(seg->name);
    return ncclSystemError;
  }
  void* p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  err = errno;
  close(fd);
  if (p == MAP_FAILED) {
    WEFT_WARN("mmap of shared memory segment %s (%zu bytes) failed: %s", seg->name, size, strerror(err));
    shm_unlink(seg->name);
    return ncclSystemError;
  }
  seg->ptr = p;
  seg->size = size;
  WEFT_INFO(WEFT_SHM, "Created shared memory segment %s of %zu bytes", seg->name, size);
  return ncclSuccess;
}

ncclResult_t weft_shm_open(const char* name, size_t size, struct weft_shm_seg* seg) {
  memset(seg, 0, sizeof(*seg));
  snprintf(seg->name, sizeof(seg->name), "%s", name);
  int fd = shm_open(name, O_RDWR, 0600);
  if (fd < 0) {
    WEFT_WARN("shm_open(%s) of a peer's segment failed: %s", name, strerror(errno));
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

void weft_shm_unlink(const char* name) {
  if (shm_unlink(name) < 0 && errno != ENOENT) WEFT_WARN("shm_unlink(%s) failed: %s", name, strerror(errno));
}

void weft_shm_close(struct weft_shm_seg* seg) {
  if (seg == NULL || seg->ptr == NULL) return;
  munmap(seg->ptr, seg->size);
  seg->ptr = NULL;
}
