/* Loading NCCL network plugins: NCCL_NET_PLUGIN is a comma-separated list of library names
 * ("ib" means libnccl-net-ib.so) or file names ending in .so; "none" loads nothing; unset tries
 * libnccl-net.so, whose absence is normal. A library's newest ncclNetPlugin_vN (12 down to 6)
 * is used; its init must succeed and it must have a device. Anything else is a WARN and the
 * built-in networks remain. Per-version differences of the calls are handled here. */
#include "transport/net_plugin.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "util/check.h"
#include "util/log.h"
#include "util/param.h"
#include "util/plugin_lib.h"
#include "util/psk.h"

static struct weft_plugin plugs[WEFT_NET_MAX_PLUGINS];
static const struct weft_net_ops* plug_ops[WEFT_NET_MAX_PLUGINS];
static int nplugs;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* Plugins may call the profiler callback unconditionally; Weft records nothing from it. */
static ncclResult_t plugin_prof(void** event, int type, void* parent, int64_t plugin_id, void* data) {
  (void)type, (void)parent, (void)plugin_id, (void)data;
  if (event) *event = NULL;
  return ncclSuccess;
}

/* ---- Version shims: one per call whose argument list changed ---- */
static ncclResult_t call_init(struct weft_plugin* p) {
  if (p->version >= 11) {
    struct weft_plugin_comm_config cfg = {-1};
    return p->t->init.v11(&p->ctx, 0, &cfg, weft_plugin_log, plugin_prof);
  }
  if (p->version == 10) return p->t->init.v10(weft_plugin_log, plugin_prof);
  return p->t->init.v6(weft_plugin_log);
}

static ncclResult_t call_listen(struct weft_plugin* p, int dev, void* handle, void** lc) {
  return p->version >= 11 ? p->t->listen.v11(p->ctx, dev, handle, lc) : p->t->listen.v6(dev, handle, lc);
}

/* Offload (device) handles are for GPU-initiated networking, which Weft does not do: ignored. */
static ncclResult_t call_connect(struct weft_plugin* p, int dev, void* handle, void** sc) {
  weft_pdh* dh = NULL;
  struct weft_plugin_comm_config cfg = {-1};
  if (p->version >= 11) return p->t->connect.v11(p->ctx, dev, handle, sc, &dh);
  if (p->version == 10) return p->t->connect.v10(dev, &cfg, handle, sc, &dh);
  if (p->version >= 7) return p->t->connect.v7(dev, handle, sc, &dh);
  return p->t->connect.v6(dev, handle, sc);
}

ncclResult_t weft_plugin_call_accept(struct weft_plugin* p, void* lc, void** rc) {
  weft_pdh* dh = NULL;
  return p->version >= 7 ? p->t->accept.v7(lc, rc, &dh) : p->t->accept.v6(lc, rc);
}

ncclResult_t weft_plugin_call_reg(struct weft_plugin* p, void* comm, void* data, size_t size, int type,
                                  void** mh) {
  if (p->version >= 8) return p->t->reg_mr.v8(comm, data, size, type, mh);
  if (size > INT32_MAX) return ncclInvalidArgument;
  return p->t->reg_mr.v6(comm, data, (int)size, type, mh);
}

ncclResult_t weft_plugin_call_isend(struct weft_plugin* p, void* comm, void* data, size_t size, void* mh,
                                    void** req) {
  const int tag = 0; /* one tag for every message: Weft's own tags travel in the adapter's header */
  if (p->version >= 10) return p->t->isend.v10(comm, data, size, tag, mh, NULL, req);
  if (p->version == 9) return p->t->isend.v9(comm, data, size, tag, mh, req);
  if (size > INT32_MAX) return ncclInvalidArgument;
  return p->t->isend.v6(comm, data, (int)size, tag, mh, req);
}

ncclResult_t weft_plugin_call_irecv(struct weft_plugin* p, void* comm, void* data, size_t size, void* mh,
                                    void** req) {
  int tag = 0;
  void* ph = NULL;
  if (p->version >= 9) {
    size_t sz = size;
    return p->version >= 10 ? p->t->irecv.v10(comm, 1, &data, &sz, &tag, &mh, &ph, req)
                            : p->t->irecv.v9(comm, 1, &data, &sz, &tag, &mh, req);
  }
  if (size > INT32_MAX) return ncclInvalidArgument;
  int sz = (int)size;
  return p->t->irecv.v6(comm, 1, &data, &sz, &tag, &mh, req);
}

/* The leading properties every version has, whatever its layout. */
static ncclResult_t call_props(struct weft_plugin* p, int dev, struct weft_plugin_props_v9* out) {
  union weft_plugin_props u;
  memset(&u, 0, sizeof(u));
  ncclResult_t res = p->t->get_properties(dev, &u);
  if (res != ncclSuccess) return res;
  if (p->version >= 9) {
    *out = u.v9;
    return ncclSuccess;
  }
  memset(out, 0, sizeof(*out));
  out->name = u.v6.name;
  out->pci_path = u.v6.pci_path;
  out->ptr_support = p->version == 8 ? u.v8.ptr_support : u.v6.ptr_support;
  out->speed = p->version == 8 ? u.v8.speed : u.v6.speed;
  out->latency = p->version == 8 ? u.v8.latency : u.v6.latency;
  out->max_comms = p->version == 8 ? u.v8.max_comms : u.v6.max_comms;
  return ncclSuccess;
}

/* GPUDirect RDMA as the plugin's properties offer it: GPU memory by address (NCCL_PTR_CUDA) or
 * as a DMA-BUF (NCCL_PTR_DMABUF, with regMrDmaBuf and NCCL_DMABUF_ENABLE). A device that asks
 * for flushes (forceFlush, v9 and later) is left on host memory: Weft does not flush. */
static int plug_gpu_direct(struct weft_plugin* p, int dev) {
  struct weft_plugin_props_v9 pp;
  if (call_props(p, dev, &pp) != ncclSuccess || pp.force_flush) return 0;
  int how = pp.ptr_support & WEFT_PLUGIN_PTR_CUDA ? WEFT_NET_GPU_PEERMEM : 0;
  if (pp.ptr_support & WEFT_PLUGIN_PTR_DMABUF && p->t->reg_mr_dmabuf != NULL &&
      weft_param_int("NCCL_DMABUF_ENABLE"))
    how |= WEFT_NET_GPU_DMABUF;
  return how;
}

/* ---- The ops table of each plugin ---- */
static ncclResult_t plug_props(struct weft_plugin* p, int dev, struct weft_net_props* props) {
  struct weft_plugin_props_v9 pp;
  ncclResult_t res = call_props(p, dev, &pp);
  if (res != ncclSuccess) return res;
  memset(props, 0, sizeof(*props));
  snprintf(props->name, sizeof(props->name), "%s", pp.name ? pp.name : "?");
  snprintf(props->addr, sizeof(props->addr), "%s/%s", p->t->name, pp.name ? pp.name : "?");
  props->speed_mbps = pp.speed;
  props->latency_us = (int)pp.latency;
  props->max_comms = pp.max_comms;
  return ncclSuccess;
}

/* With encryption on, the job must not run in clear: a plugin's connections cannot be given
 * the pre-shared key (the ABI has no place for it), so a plugin network refuses to connect. */
static ncclResult_t refuse_if_encrypted(struct weft_plugin* p) {
  uint8_t digest[WEFT_PSK_DIGEST_BYTES];
  if (weft_psk_digest(digest) == 0) return ncclSuccess;
  WEFT_WARN(
      "NET/Plugin %s: encryption is on (ncclSetEncryption or WEFT_PSK_FILE) and a plugin network cannot "
      "encrypt; set NCCL_NET=Socket or NCCL_NET_PLUGIN=none",
      p->t->name);
  return ncclInvalidUsage;
}

static ncclResult_t plug_listen(struct weft_plugin* p, int dev, const struct weft_auth_key* key, void* handle,
                                void** out) {
  (void)key; /* a plugin has no way to prove it; see the README's limits */
  void* lc = NULL;
  WEFT_CHECK(refuse_if_encrypted(p));
  memset(handle, 0, WEFT_NET_HANDLE_BYTES);
  ncclResult_t res = call_listen(p, dev, handle, &lc);
  if (res != ncclSuccess) {
    WEFT_WARN("NET/Plugin %s: listen on device %d failed: %s", p->t->name, dev, ncclGetErrorString(res));
    return res;
  }
  return weft_plugin_wrap_listen(p, lc, out);
}

static ncclResult_t plug_connect(struct weft_plugin* p, int dev, const struct weft_auth_key* key,
                                 void* handle, void** out) {
  (void)key;
  void* sc = NULL;
  *out = NULL;
  WEFT_CHECK(refuse_if_encrypted(p));
  ncclResult_t res = call_connect(p, dev, handle, &sc);
  if (res != ncclSuccess) {
    WEFT_WARN("NET/Plugin %s: connect on device %d failed: %s", p->t->name, dev, ncclGetErrorString(res));
    return res;
  }
  return sc ? weft_plugin_wrap_comm(p, sc, 1, out) : ncclSuccess;
}

static ncclResult_t plug_noop_init(void) { return ncclSuccess; } /* initialized when loaded */

/* Calls without a comm argument cannot tell plugins apart: one set of entry points per slot. */
#define SLOT(i)                                                                                            \
  static ncclResult_t devices_##i(int* n) { return plugs[i].t->devices(n); }                               \
  static ncclResult_t props_##i(int d, struct weft_net_props* pr) { return plug_props(&plugs[i], d, pr); } \
  static ncclResult_t listen_##i(int d, const struct weft_auth_key* k, void* h, void** l) {                \
    return plug_listen(&plugs[i], d, k, h, l);                                                             \
  }                                                                                                        \
  static ncclResult_t connect_##i(int d, const struct weft_auth_key* k, void* h, void** s) {               \
    return plug_connect(&plugs[i], d, k, h, s);                                                            \
  }                                                                                                        \
  static int gpu_direct_##i(int d) { return plug_gpu_direct(&plugs[i], d); }
// clang-format off
SLOT(0) SLOT(1) SLOT(2) SLOT(3) SLOT(4) SLOT(5) SLOT(6) SLOT(7)
SLOT(8) SLOT(9) SLOT(10) SLOT(11) SLOT(12) SLOT(13) SLOT(14) SLOT(15)
#define OPS(i) {NULL, plug_noop_init, devices_##i, props_##i, listen_##i, connect_##i, weft_plugin_accept, \
                weft_plugin_isend, weft_plugin_irecv, weft_plugin_test, weft_plugin_close_send,            \
                weft_plugin_close_recv, weft_plugin_close_listen, weft_plugin_keep_registered,            \
                weft_plugin_drop_registered, weft_plugin_isend_meta, weft_plugin_test_meta,               \
                gpu_direct_##i, weft_plugin_keep_registered_gpu}
static const struct weft_net_ops slot_ops[WEFT_NET_MAX_PLUGINS] = {
    OPS(0), OPS(1), OPS(2), OPS(3), OPS(4), OPS(5), OPS(6), OPS(7),
    OPS(8), OPS(9), OPS(10), OPS(11), OPS(12), OPS(13), OPS(14), OPS(15)};
// clang-format on

/* ---- Loading ---- */
static const void* newest_symbol(void* dl, const char* prefix, int* version) {
  for (int v = WEFT_PLUGIN_VERSION_MAX; v >= WEFT_PLUGIN_VERSION_MIN; v--) {
    char sym[64];
    snprintf(sym, sizeof(sym), "%s_v%d", prefix, v);
    const void* t = weft_plugin_lib_sym(dl, sym);
    if (t) {
      *version = v;
      return t;
    }
  }
  return NULL;
}

/* Init, a device, host memory: what the host-side connectors need of a plugin. */
static int usable(struct weft_plugin* p) {
  int ndev = 0;
  struct weft_plugin_props_v9 pp;
  ncclResult_t res = call_init(p);
  if (res != ncclSuccess) {
    WEFT_WARN("NET/Plugin: %s (%s, v%d): init failed: %s; not used", p->t->name, p->lib, p->version,
              ncclGetErrorString(res));
  } else if (p->t->devices(&ndev) != ncclSuccess || ndev <= 0) {
    WEFT_WARN("NET/Plugin: %s (%s, v%d) has no device; not used", p->t->name, p->lib, p->version);
  } else if (call_props(p, 0, &pp) != ncclSuccess || !(pp.ptr_support & WEFT_PLUGIN_PTR_HOST)) {
    WEFT_WARN("NET/Plugin: %s (%s, v%d): device 0 does not take host memory (ptrSupport 0x%x); not used",
              p->t->name, p->lib, p->version, (unsigned)pp.ptr_support);
  } else {
    return 1;
  }
  return 0;
}

/* Load one library; named: given by the user (failures are WARNs, not INFOs). */
static void load_one(const char* entry, int named) {
  if (nplugs == WEFT_NET_MAX_PLUGINS) {
    WEFT_WARN("NCCL_NET_PLUGIN: more than %d plugins; %s is ignored", WEFT_NET_MAX_PLUGINS, entry);
    return;
  }
  struct weft_plugin* p = &plugs[nplugs];
  /* As NCCL: the entry as given, then (a bare name) libnccl-net-<entry>.so; why each try failed
   * is logged at INFO. */
  p->dl = weft_plugin_lib_open("NET", WEFT_INIT | WEFT_NET, "libnccl-net", entry, p->lib, sizeof(p->lib));
  if (p->dl == NULL) {
    if (named)
      WEFT_WARN(
          "NET/Plugin: cannot load NCCL_NET_PLUGIN entry '%s' (tried %s%s%s%s); using the built-in networks",
          entry, entry, weft_plugin_lib_expands(entry) ? " and libnccl-net-" : "",
          weft_plugin_lib_expands(entry) ? entry : "", weft_plugin_lib_expands(entry) ? ".so" : "");
    else
      WEFT_INFO(WEFT_INIT | WEFT_NET, "NET/Plugin: no %s; using the built-in networks", entry);
    return;
  }
  p->t = newest_symbol(p->dl, "ncclNetPlugin", &p->version);
  int cversion = 0;
  const struct weft_plugin_collnet* cn = newest_symbol(p->dl, "ncclCollNetPlugin", &cversion);
  if (cn)
    WEFT_INFO(
        WEFT_INIT | WEFT_NET,
        "NET/Plugin: CollNet plugin %s (v%d) found in %s; the CollNet algorithm is not implemented, so it "
        "is not used",
        cn->name ? cn->name : "?", cversion, p->lib);
  if (p->t == NULL) {
    WEFT_WARN("NET/Plugin: %s exports none of ncclNetPlugin_v%d..v%d; using the built-in networks", p->lib,
              WEFT_PLUGIN_VERSION_MAX, WEFT_PLUGIN_VERSION_MIN);
  } else if (p->t->name == NULL) {
    WEFT_WARN("NET/Plugin: %s: ncclNetPlugin_v%d has no name; not used", p->lib, p->version);
  } else if (usable(p)) {
    p->ops = slot_ops[nplugs];
    p->ops.name = p->t->name;
    plug_ops[nplugs++] = &p->ops;
    WEFT_INFO(WEFT_INIT | WEFT_NET, "NET/Plugin: loaded %s from %s (net plugin ABI v%d)", p->t->name, p->lib,
              p->version);
    return;
  }
  if (cn == NULL) weft_plugin_lib_close(p->dl); /* kept open otherwise: CollNet was reported from it */
  memset(p, 0, sizeof(*p));
}

static void load_all(void) {
  const char* env = weft_param_str("NCCL_NET_PLUGIN");
  if (env == NULL) {
    load_one("libnccl-net.so", 0);
    return;
  }
  if (strcasecmp(env, "none") == 0) {
    WEFT_INFO(WEFT_INIT | WEFT_NET, "NET/Plugin: NCCL_NET_PLUGIN=none; no plugin loaded");
    return;
  }
  char list[1024];
  snprintf(list, sizeof(list), "%s", env);
  char* save = NULL;
  for (char* e = strtok_r(list, ",", &save); e; e = strtok_r(NULL, ",", &save))
    if (e[0]) load_one(e, 1);
}

void weft_net_plugins(const struct weft_net_ops* const** out, int* n) {
  pthread_once(&load_once, load_all);
  *out = plug_ops;
  *n = nplugs;
}
