#!/usr/bin/env bash
# Compile-only check that the portable algorithm bodies and reduce.h build as CUDA for sm_90,
# against a stub prims implementation. SKIP when nvcc is absent.
set -eu
cd "$(dirname "$0")/../.."
NVCC=${NVCC:-$(command -v nvcc || true)}
[ -z "$NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc
if [ -z "$NVCC" ]; then echo "SKIP: nvcc not found"; exit 77; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/algo_check.cu" <<'CU'
#include "collectives/dev_types.h"
#include "collectives/reduce.h"
struct weft_prims { char* buf; int failed; };
__device__ void weft_prims_send(struct weft_prims* p, size_t i, size_t n) { p->buf[i] = (char)n; }
__device__ void weft_prims_copy_send(struct weft_prims* p, size_t i, size_t o, size_t n) { p->buf[i + o] = (char)n; }
__device__ void weft_prims_recv(struct weft_prims* p, size_t o, size_t n) { p->buf[o] = (char)n; }
__device__ void weft_prims_recv_copy_send(struct weft_prims* p, size_t o, size_t n) { p->buf[o] += (char)n; }
__device__ void weft_prims_recv_reduce_send(struct weft_prims* p, size_t i, size_t n) { p->buf[i] -= (char)n; }
__device__ void weft_prims_recv_reduce_copy(struct weft_prims* p, size_t i, size_t o, size_t n) { p->buf[i] ^= (char)(o + n); }
__device__ void weft_prims_recv_reduce_copy_send(struct weft_prims* p, size_t i, size_t o, size_t n) { p->buf[i] |= (char)(o + n); }
__device__ void weft_prims_local(struct weft_prims* p, size_t i, size_t o, size_t n) { p->buf[i] &= (char)(o + n); }
__device__ int weft_prims_failed(const struct weft_prims* p) { return p->failed; }
#include "collectives/algo/ring.h"
#include "collectives/algo/sendrecv.h"
#define LOOPS(E, NAME, T) \
  weft_red_sum_##NAME((T*)d, (const T*)a, (const T*)b, n); weft_red_prod_##NAME((T*)d, (const T*)a, (const T*)b, n); \
  weft_red_max_##NAME((T*)d, (const T*)a, (const T*)b, n); weft_red_min_##NAME((T*)d, (const T*)a, (const T*)b, n); \
  weft_premulsum_##NAME((T*)d, (const T*)a, (const T*)b, 1, n); weft_postdiv_##NAME((T*)d, 3, n);
__global__ void algo_check(char* buf, struct weft_dev_work w, void* d, const void* a, const void* b, size_t n) {
  struct weft_prims p = {buf, 0};
  weft_ring_allreduce(&p, &w);
  weft_ring_allgather(&p, &w);
  weft_ring_reducescatter(&p, &w);
  weft_ring_broadcast(&p, &w);
  weft_ring_reduce(&p, &w);
  weft_p2p_send(&p, w.count, w.chunk);
  weft_p2p_recv(&p, w.count, w.chunk);
  WEFT_FOR_EACH_DT(LOOPS)
}
CU
"$NVCC" -std=c++17 -arch=sm_90 -Isrc -Iinclude -c "$tmp/algo_check.cu" -o "$tmp/algo_check.o"
echo "algo bodies and reduce.h compile for sm_90"
