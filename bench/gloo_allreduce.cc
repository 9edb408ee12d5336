// Gloo driver of bench/compare.sh: gloo::allreduce with the ring algorithm over TCP on
// 127.0.0.1, the way PyTorch's Gloo process group calls it (options built per call).
// Rank and size from RANK/SIZE, rendezvous in the FileStore directory GLOO_STORE.
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <memory>

#include "sweep.h"

static std::shared_ptr<gloo::rendezvous::Context> ctx;

template <typename T>
static void gloo_reduce(const T* in, T* out, size_t count,
                        void (*fn)(void*, const void*, const void*, size_t)) {
  gloo::AllreduceOptions opts(ctx);
  opts.setInput(const_cast<T*>(in), count);
  opts.setOutput(out, count);
  opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  opts.setReduceFunction(fn);
  gloo::allreduce(opts);
}

static void g_allreduce(const float* in, float* out, size_t count) {
  gloo_reduce<float>(in, out, count, &gloo::sum<float>);
}
static void g_barrier(void) {
  gloo::BarrierOptions opts(ctx);
  gloo::barrier(opts);
}
static double g_sum(double x) {
  double y;
  gloo_reduce<double>(&x, &y, 1, &gloo::sum<double>);
  return y;
}
static double g_max(double x) {
  double y;
  gloo_reduce<double>(&x, &y, 1, &gloo::max<double>);
  return y;
}

int main(int argc, char** argv) {
  const char *r = getenv("RANK"), *s = getenv("SIZE"), *store_dir = getenv("GLOO_STORE");
  if (!r || !s || !store_dir) {
    fprintf(stderr, "gloo_allreduce: set RANK, SIZE and GLOO_STORE\n");
    return 1;
  }
  struct sweep_ops o = {};
  o.rank = atoi(r);
  o.nranks = atoi(s);
  o.allreduce = g_allreduce;
  o.barrier = g_barrier;
  o.sum = g_sum;
  o.max = g_max;
  gloo::transport::tcp::attr attr("127.0.0.1");
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(store_dir);
  ctx = std::make_shared<gloo::rendezvous::Context>(o.rank, o.nranks);
  ctx->connectFullMesh(store, dev);
  return sweep_main(&o, argc, argv, "Gloo ring (tcp 127.0.0.1)");
}
