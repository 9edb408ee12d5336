"""Python NCCL clients (CuPy's cupy.cuda.nccl, nccl4py's nccl.bindings) over Weft's host backend.

Usage: clients.py CLIENT NRANKS EXPECTED_LIB
Starts NRANKS processes (multiprocessing, spawn); rank 0's unique id reaches the others through the
parent by pipes. Each rank checks that the only libnccl mapped in the process is EXPECTED_LIB, then
runs every collective over numpy buffers' raw pointers for float32, float16, bfloat16, int32 and
int64 with every reduction op, send/recv rings and an all-to-all in groups, a comm split, and an
abort that unblocks a receive waiting in another thread. Exits 0 when every rank passed.
"""

import ctypes
import multiprocessing as mp
import os
import sys
import threading
import time
import traceback

import numpy as np

TYPES = ["float32", "float16", "bfloat16", "int32", "int64"]
OPS = ["sum", "prod", "max", "min", "avg"]


class CupyClient:
    name = "cupy"

    def __init__(self):
        from cupy.cuda import nccl

        self.n = nccl
        self.types = {
            "float32": nccl.NCCL_FLOAT32,
            "float16": nccl.NCCL_FLOAT16,
            "bfloat16": getattr(nccl, "NCCL_BFLOAT16", None),
            "int32": nccl.NCCL_INT32,
            "int64": nccl.NCCL_INT64,
        }
        self.ops = {
            "sum": nccl.NCCL_SUM,
            "prod": nccl.NCCL_PROD,
            "max": nccl.NCCL_MAX,
            "min": nccl.NCCL_MIN,
            "avg": nccl.NCCL_AVG,
        }
        self.error = nccl.NcclError

    def version(self):
        return self.n.get_version()

    def unique_id(self):
        uid = self.n.get_unique_id()
        return bytes(uid) if isinstance(uid, bytes) else bytes(bytearray(x & 0xFF for x in uid))

    def init(self, nranks, uid, rank):
        try:
            return self.n.NcclCommunicator(nranks, uid, rank)
        except TypeError:  # CuPy < 14 takes the id as a tuple of ints
            return self.n.NcclCommunicator(nranks, tuple(ctypes.c_byte(b).value for b in uid), rank)

    def all_reduce(self, c, s, r, n, t, op):
        c.allReduce(s, r, n, t, op, 0)

    def reduce(self, c, s, r, n, t, op, root):
        c.reduce(s, r, n, t, op, root, 0)

    def broadcast(self, c, s, r, n, t, root):
        c.broadcast(s, r, n, t, root, 0)

    def all_gather(self, c, s, r, n, t):
        c.allGather(s, r, n, t, 0)

    def reduce_scatter(self, c, s, r, n, t, op):
        c.reduceScatter(s, r, n, t, op, 0)

    def send(self, c, s, n, t, peer):
        c.send(s, n, t, peer, 0)

    def recv(self, c, r, n, t, peer):
        c.recv(r, n, t, peer, 0)

    def group_start(self):
        self.n.groupStart()

    def group_end(self):
        self.n.groupEnd()

    def split(self, c, color, key):
        return c.commSplit(color, key)

    def count(self, c):
        return c.size()

    def rank(self, c):
        return c.rank_id()

    def abort(self, c):
        c.abort()

    def destroy(self, c):
        c.destroy()


class Nccl4pyClient:
    name = "nccl4py"

    def __init__(self):
        from nccl.bindings import nccl

        self.n = nccl
        D, R = nccl.DataType, nccl.RedOp
        self.types = {
            "float32": D.Float32,
            "float16": D.Float16,
            "bfloat16": getattr(D, "Bfloat16", None),
            "int32": D.Int32,
            "int64": D.Int64,
        }
        self.ops = {"sum": R.Sum, "prod": R.Prod, "max": R.Max, "min": R.Min, "avg": R.Avg}
        self.error = nccl.NCCLError

    def version(self):
        return self.n.get_version()

    def unique_id(self):
        uid = self.n.get_unique_id()  # owns the memory .ptr points at
        return ctypes.string_at(uid.ptr, 128)

    def init(self, nranks, uid, rank):
        buf = bytearray(uid)  # from_buffer wraps it: it must outlive the call
        return self.n.comm_init_rank(nranks, self.n.UniqueId.from_buffer(buf), rank)

    def all_reduce(self, c, s, r, n, t, op):
        self.n.all_reduce(s, r, n, t, op, c, 0)

    def reduce(self, c, s, r, n, t, op, root):
        self.n.reduce(s, r, n, t, op, root, c, 0)

    def broadcast(self, c, s, r, n, t, root):
        self.n.broadcast(s, r, n, t, root, c, 0)

    def all_gather(self, c, s, r, n, t):
        self.n.all_gather(s, r, n, t, c, 0)

    def reduce_scatter(self, c, s, r, n, t, op):
        self.n.reduce_scatter(s, r, n, t, op, c, 0)

    def send(self, c, s, n, t, peer):
        self.n.send(s, n, t, peer, c, 0)

    def recv(self, c, r, n, t, peer):
        self.n.recv(r, n, t, peer, c, 0)

    def group_start(self):
        self.n.group_start()

    def group_end(self):
        self.n.group_end()

    def split(self, c, color, key):
        return self.n.comm_split(c, color, key, 0)

    def count(self, c):
        return self.n.comm_count(c)

    def rank(self, c):
        return self.n.comm_user_rank(c)

    def abort(self, c):
        self.n.comm_abort(c)

    def destroy(self, c):
        self.n.comm_destroy(c)


CLIENTS = {"cupy": CupyClient, "nccl4py": Nccl4pyClient}


# Buffers: numpy arrays in the type's storage (bfloat16 as uint16 bit patterns), values as float64.
def storage(t):
    return np.uint16 if t == "bfloat16" else np.dtype(t).type


def encode(t, values):
    v = np.asarray(values, dtype=np.float64)
    if t == "bfloat16":  # the values used are exact in bfloat16: the top half of their float32
        return (v.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return v.astype(storage(t))


def decode(t, buf):
    if t == "bfloat16":
        return (buf.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return buf.astype(np.float64)


def inputs(rank, count, salt=0):
    """Small integers (1..3): sums, products and averages over 2 or 4 ranks are exact in every type."""
    i = np.arange(count)
    return 1 + (rank * 3 + i + salt) % 3


def reduced(op, nranks, count, salt=0, t="float32"):
    vals = np.stack([inputs(r, count, salt) for r in range(nranks)]).astype(np.float64)
    if op == "sum":
        return vals.sum(0)
    if op == "prod":
        return vals.prod(0)
    if op == "max":
        return vals.max(0)
    if op == "min":
        return vals.min(0)
    avg = vals.sum(0) / nranks  # exact in floats over 2 or 4 ranks; integers truncate
    return np.floor(avg) if t.startswith("int") else avg


class Checker:
    def __init__(self, rank):
        self.rank, self.passed, self.failed = rank, 0, []

    def equal(self, what, t, got_buf, want):
        got = decode(t, got_buf)
        if np.array_equal(got, np.asarray(want, dtype=np.float64)):
            self.passed += 1
        else:
            bad = np.nonzero(got != want)[0][:4]
            self.failed.append(f"{what}: elements {bad.tolist()} got {got[bad].tolist()} want {np.asarray(want)[bad].tolist()}")

    def true(self, what, cond):
        if cond:
            self.passed += 1
        else:
            self.failed.append(what)


def mapped_libnccl():
    out = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if "libnccl" in os.path.basename(path):
                out.add(os.path.realpath(path))
    return out


def ptr(a):
    return a.ctypes.data


def collectives(cl, comm, rank, n, ck):
    count = 37  # odd, and not a multiple of the rank count
    for t in TYPES:
        dt = cl.types[t]
        if dt is None:
            continue
        for op in OPS:
            salt = OPS.index(op)
            send = encode(t, inputs(rank, count, salt))
            recv = np.zeros_like(send)
            cl.all_reduce(comm, ptr(send), ptr(recv), count, dt, cl.ops[op])
            ck.equal(f"all_reduce {t} {op}", t, recv, reduced(op, n, count, salt, t))
            inplace = send.copy()
            cl.all_reduce(comm, ptr(inplace), ptr(inplace), count, dt, cl.ops[op])
            ck.equal(f"all_reduce in-place {t} {op}", t, inplace, reduced(op, n, count, salt, t))
            root = (salt + 1) % n
            recv = encode(t, np.full(count, 7))
            cl.reduce(comm, ptr(send), ptr(recv), count, dt, cl.ops[op], root)
            ck.equal(f"reduce {t} {op} root {root}", t, recv,
                     reduced(op, n, count, salt, t) if rank == root else np.full(count, 7))
            rs_send = encode(t, np.concatenate([inputs(rank, count, salt + k) for k in range(n)]))
            rs_recv = np.zeros(count, dtype=storage(t))
            cl.reduce_scatter(comm, ptr(rs_send), ptr(rs_recv), count, dt, cl.ops[op])
            ck.equal(f"reduce_scatter {t} {op}", t, rs_recv, reduced(op, n, count, salt + rank, t))
        root = TYPES.index(t) % n
        buf = encode(t, inputs(rank, count) * (rank + 1))
        cl.broadcast(comm, ptr(buf), ptr(buf), count, dt, root)
        ck.equal(f"broadcast {t} root {root}", t, buf, inputs(root, count) * (root + 1))
        send = encode(t, inputs(rank, count))
        recv = np.zeros(count * n, dtype=storage(t))
        cl.all_gather(comm, ptr(send), ptr(recv), count, dt)
        ck.equal(f"all_gather {t}", t, recv, np.concatenate([inputs(r, count) for r in range(n)]))


def point_to_point(cl, comm, rank, n, ck):
    count = 1000
    dt = cl.types["int32"]
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    send = encode("int32", inputs(rank, count) + 10 * rank)
    recv = np.zeros_like(send)
    cl.group_start()
    cl.send(comm, ptr(send), count, dt, nxt)
    cl.recv(comm, ptr(recv), count, dt, prv)
    cl.group_end()
    ck.equal("send/recv ring", "int32", recv, inputs(prv, count) + 10 * prv)
    # All-to-all, self included, as torch and Horovod issue it: one group of 2n calls.
    send = encode("int64", np.concatenate([np.full(count, 100 * rank + p) for p in range(n)]))
    recv = np.zeros_like(send)
    cl.group_start()
    for p in range(n):
        cl.send(comm, ptr(send[p * count:]), count, cl.types["int64"], p)
        cl.recv(comm, ptr(recv[p * count:]), count, cl.types["int64"], p)
    cl.group_end()
    ck.equal("all-to-all in a group", "int64", recv, np.concatenate([np.full(count, 100 * p + rank) for p in range(n)]))


def split(cl, comm, rank, n, ck):
    color = rank % 2
    sub = cl.split(comm, color, -rank)  # key -rank: the new ranks run backwards
    members = [r for r in range(n) if r % 2 == color]
    ck.true(f"split: count {cl.count(sub)} == {len(members)}", cl.count(sub) == len(members))
    want_rank = sorted(members, reverse=True).index(rank)
    ck.true(f"split: rank {cl.rank(sub)} == {want_rank}", cl.rank(sub) == want_rank)
    send = encode("float32", np.full(8, rank + 1))
    recv = np.zeros_like(send)
    cl.all_reduce(sub, ptr(send), ptr(recv), 8, cl.types["float32"], cl.ops["sum"])
    ck.equal("all_reduce on the split comm", "float32", recv, np.full(8, sum(m + 1 for m in members)))
    cl.destroy(sub)


def abort(cl, comm, rank, n, ck):
    """Odd ranks wait in a receive that no one sends, and abort the comm from another thread."""
    sub = cl.split(comm, 0, rank)
    if rank % 2 == 1:
        buf = np.zeros(16, dtype=np.float32)
        result = {}

        def wait():
            try:
                cl.recv(sub, ptr(buf), 16, cl.types["float32"], rank - 1)
                result["ret"] = "returned"
            except Exception as e:  # an error is what an aborted receive may give
                result["ret"] = repr(e)

        th = threading.Thread(target=wait, daemon=True)
        th.start()
        time.sleep(0.3)
        ck.true("receive is still waiting before the abort", th.is_alive())
        cl.abort(sub)
        th.join(20)
        ck.true("abort unblocks a waiting receive", not th.is_alive())
    # Even ranks keep their side until the odd ones have aborted, then abort too.
    one = np.ones(1, dtype=np.float32)
    out = np.zeros(1, dtype=np.float32)
    cl.all_reduce(comm, ptr(one), ptr(out), 1, cl.types["float32"], cl.ops["sum"])
    ck.true("main comm works after the abort", out[0] == n)
    if rank % 2 == 0:
        cl.abort(sub)


def nccl4py_extras(cl, comm, rank, n, ck, notes):
    """2.29+ calls nccl4py wraps; reported, not required, while Weft may still say 'not supported'."""
    b = cl.n
    try:
        p = b.comm_query_properties(comm)
        ck.true(f"comm_query_properties rank {p.rank} n_ranks {p.n_ranks}", p.rank == rank and p.n_ranks == n)
    except cl.error as e:
        notes.append(f"comm_query_properties: {e}")
    try:
        keys = b.param_get_all_keys()
        ck.true("param_get_all_keys lists NCCL_DEBUG", "NCCL_DEBUG" in keys)
    except cl.error as e:
        notes.append(f"param_get_all_keys: {e}")
    try:
        send = encode("float32", inputs(rank, 16))
        recv = np.zeros_like(send)
        b.all_reduce_config(ptr(send), ptr(recv), 16, cl.types["float32"], cl.ops["sum"], comm, 0, b.CollConfig())
        ck.equal("all_reduce_config", "float32", recv, reduced("sum", n, 16))
    except cl.error as e:
        notes.append(f"all_reduce_config: {e}")


def worker(client, rank, n, expected_lib, conn):
    ck, notes = Checker(rank), []
    try:
        cl = CLIENTS[client]()
        version = cl.version()  # nccl4py opens the library here; CuPy has it linked
        libs = mapped_libnccl()
        ck.true(f"only Weft's library is mapped: {sorted(libs)}", libs == {os.path.realpath(expected_lib)})
        ck.true(f"ncclGetVersion {version} is NCCL 2.x (>= 2.28)", 22800 <= version < 30000)
        if rank == 0:
            conn.send(cl.unique_id())
        uid = conn.recv()
        comm = cl.init(n, uid, rank)
        ck.true("comm count and rank", cl.count(comm) == n and cl.rank(comm) == rank)
        collectives(cl, comm, rank, n, ck)
        point_to_point(cl, comm, rank, n, ck)
        split(cl, comm, rank, n, ck)
        if client == "nccl4py":
            nccl4py_extras(cl, comm, rank, n, ck, notes)
        abort(cl, comm, rank, n, ck)
        cl.destroy(comm)
    except Exception:
        ck.failed.append("exception: " + traceback.format_exc())
    conn.send((ck.passed, ck.failed, notes))


def main():
    client, n, expected_lib = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    ctx = mp.get_context("spawn")
    pipes = [ctx.Pipe() for _ in range(n)]
    procs = [ctx.Process(target=worker, args=(client, r, n, expected_lib, pipes[r][1])) for r in range(n)]
    for p in procs:
        p.start()
    ok = True
    try:
        uid = pipes[0][0].recv()
        for r in range(1, n):
            pipes[r][0].send(uid)
        pipes[0][0].send(uid)
        for r in range(n):
            if not pipes[r][0].poll(120):
                print(f"{client} rank {r}: no report within 120 s")
                ok = False
                continue
            passed, failed, notes = pipes[r][0].recv()
            for note in notes:
                print(f"{client} rank {r}: note: {note}")
            for f in failed:
                print(f"{client} rank {r}: FAIL {f}")
            print(f"{client} rank {r}/{n}: {passed} checks passed, {len(failed)} failed")
            ok = ok and not failed and passed > 0
    except EOFError:
        print(f"{client}: a rank died before reporting")
        ok = False
    for p in procs:
        p.join(10)
        if p.is_alive():
            p.kill()
            ok = False
        elif p.exitcode != 0:
            print(f"{client}: rank process exited with {p.exitcode}")
            ok = False
    print(f"{client} {n} ranks: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
