#!/usr/bin/env python3
"""Tables of bench/init_scale.sh and the init model of docs/PERFORMANCE.md ("Init at scale").

Usage: init_model.py RESULTS   (the raw rows bench/init_scale.sh writes)

The model has four parts, each one cost per event times a count of events:
  root fan-in       t_in  per check-in, n / R of them at the busiest of R roots
  ring steps        t_hop per step on an open ring socket: n - 1 per ring all-gather, one
                    before the log address all-gather
  log messages      t_msg per message (one TCP connection): the address all-gather has
                    3 ceil(log2 n) - 2 (pointer doubling, then Bruck), the G later ones
                    ceil(log2 n) each; below LOG_MIN ranks every all-gather is a ring
  per-rank work     t_loc: topology, plan, transport connects to a fixed number of neighbours
                    (ring and tree per channel), t0 once per job
  per-peer work     t_peer per rank and peer: what grows with n in each rank's init (tables
                    of all ranks, and on one host every local rank in its topology)
On this machine the n ranks share P cores, so what every rank does at once costs n / P times
its work (the ring's n - 1 steps, the gathers' rounds, the local work), while the root's
check-ins are one chain. Each cost is fitted on its own rows (bootstrap-only runs for t_hop,
t_msg and t_in, full inits for t_loc) over n <= FIT_MAX; the largest run is then predicted, not
fitted. With one core per rank (a cluster) the same costs add up without the n / P factors,
plus the wire: LAT one-way per ring step, 2 x RTT for each message's connect and send."""
import math
import re
import sys

FIT_MAX = 512
G = 5  # log all-gathers in one ncclCommInitRank on the host backend (counted with NCCL_DEBUG=TRACE)
LOG_MIN = 32  # WEFT_BOOTSTRAP_LOG_GATHER_MIN: below it the gathers take the ring
LAT, RTT = 10e-6, 25e-6  # assumed datacenter TCP: one-way latency, round trip


def load(path):
    """(label, kind, ranks, roots) -> best row (dict of floats); failed runs; header."""
    best, failed, header = {}, [], ""
    for line in open(path, errors="replace"):
        f = line.split()
        if line.startswith("#"):
            header += line
        elif f and f[0] == "failed":
            failed.append(line.strip())
        elif len(f) >= 6:
            row = {f[i]: float(f[i + 1]) for i in range(2, len(f) - 1, 2)}
            key = (f[0], f[1], int(row["ranks"]), int(row.get("roots", 1)))
            t = "init_s" if "init_s" in row else "gather_s"
            if key not in best or row[t] < best[key][t]:
                best[key] = row
    return best, failed, header


def fit1(xs, ys):
    """y = c x by least squares relative to y (every size counts alike)."""
    num = sum(x / y for x, y in zip(xs, ys) if y > 0)
    den = sum((x / y) ** 2 for x, y in zip(xs, ys) if y > 0)
    return num / den if den else 0.0


def solve(a, b):
    """Gaussian elimination with partial pivoting; None when singular."""
    k = len(b)
    m = [row[:] + [v] for row, v in zip(a, b)]
    for c in range(k):
        p = max(range(c, k), key=lambda r: abs(m[r][c]))
        if abs(m[p][c]) < 1e-300:
            return None
        m[c], m[p] = m[p], m[c]
        for r in range(k):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[r][k] / m[r][r] for r in range(k)]


def fitn(cols, ys):
    """y = sum c_j x_j by least squares relative to y; a part whose cost comes out negative is
    dropped and the rest refitted (costs are never negative)."""
    keep = list(range(len(cols)))
    while keep:
        rows = [[cols[j][i] / y for j in keep] for i, y in enumerate(ys) if y > 0]
        a = [[sum(r[p] * r[q] for r in rows) for q in range(len(keep))] for p in range(len(keep))]
        b = [sum(r[p] for r in rows) for p in range(len(keep))]
        c = solve(a, b)
        if c is None:
            keep.pop()
            continue
        if min(c) >= 0:
            out = [0.0] * len(cols)
            for j, v in zip(keep, c):
                out[j] = v
            return out
        keep.pop(c.index(min(c)))
    return [0.0] * len(cols)


def rounds(n):
    return math.ceil(math.log2(n)) if n > 1 else 0


class Model:
    def __init__(self, best, cpus):
        self.P = cpus
        boot = lambda label: {k[2]: v for k, v in best.items() if k[0] == label and k[1] == "boot" and k[3] == 1}
        log, ring = boot("log"), boot("ring")
        fit = lambda d, fx, fy: fit1([fx(n) for n in d if 4 <= n <= FIT_MAX], [fy(d[n]) for n in d if 4 <= n <= FIT_MAX])
        self.t_hop = fit(ring, lambda n: self.ring_steps(n), lambda r: r["gather_s"])
        self.t_msg = fit({n: v for n, v in log.items() if n >= LOG_MIN}, lambda n: self.log_msgs(n), lambda r: r["gather_s"])
        # The bootstrap: check-ins, then the address all-gather (t_hop and t_msg known).
        ns = [n for n in log if 4 <= n <= FIT_MAX]
        self.t_in = fit1(ns, [max(log[n]["boot_s"] - self.addresses(n), 1e-6) for n in ns])
        self.t0, self.t_loc, self.t_peer = {}, {}, {}
        for mode in ("threads", "procs"):
            d = {k[2]: v for k, v in best.items() if k[1] == mode and k[3] == 1 and 2 <= k[2] <= FIT_MAX}
            rest = [max(d[n]["init_s"] - self.bootstrap(n, 1) - self.gathers(n), 1e-6) for n in d]
            cols = [[1.0] * len(d), [self.share(n) for n in d], [n * self.share(n) for n in d]]
            self.t0[mode], self.t_loc[mode], self.t_peer[mode] = fitn(cols, rest)

    def share(self, n):  # what all n ranks do at once, on P cores
        return max(1.0, n / self.P)

    def ring_steps(self, n):
        return (n - 1) * self.share(n)

    def log_msgs(self, n):
        return rounds(n) * self.share(n)

    @staticmethod
    def address_msgs(n):
        """Messages per rank of the log address all-gather: pointer doubling asks and answers,
        then Bruck's rounds (plus one ring step, counted apart)."""
        return 2 * max(rounds(n) - 1, 0) + rounds(n)

    def addresses(self, n):
        if n < LOG_MIN:
            return self.t_hop * self.ring_steps(n)
        return (self.t_hop + self.t_msg * self.address_msgs(n)) * self.share(n)

    def bootstrap(self, n, roots):
        return self.t_in * n / roots + self.addresses(n)

    def gathers(self, n):
        return G * (self.t_msg * self.log_msgs(n) if n >= LOG_MIN else self.t_hop * self.ring_steps(n))

    def here(self, n, roots, mode):
        local = self.t0[mode] + (self.t_loc[mode] + self.t_peer[mode] * n) * self.share(n)
        return self.bootstrap(n, roots) + self.gathers(n) + local

    def cluster(self, n, roots, log=True):
        """One core per rank: parts of the critical path, in seconds (log=False: the ring, as
        with WEFT_BOOTSTRAP_LOG_GATHER_MIN=0)."""
        msg, hop = self.t_msg + 2 * RTT, self.t_hop + LAT
        return {
            "root fan-in": (self.t_in + RTT) * n / roots,
            "address all-gather": hop + msg * self.address_msgs(n) if log else hop * (n - 1),
            "other all-gathers": G * (rounds(n) * msg if log else (n - 1) * hop),
            "per-rank work": self.t0["procs"] + self.t_loc["procs"],
            "per-peer work": self.t_peer["procs"] * n,
        }


def main():
    best, failed, header = load(sys.argv[1])
    m = re.search(r"cpus (\d+)", header)
    model = Model(best, int(m.group(1)) if m else 2)
    print(header.strip())
    print("\n## Measured (best of the runs), and the model on this machine")
    print(f"{'ranks':>6} {'boot log s':>10} {'gather log s':>12} {'gather ring s':>13} {'ring/log':>8}")
    for n in sorted({k[2] for k in best if k[1] == "boot"}):
        lg, rg = best.get(("log", "boot", n, 1)), best.get(("ring", "boot", n, 1))
        if lg and rg:
            print(f"{n:>6} {lg['boot_s']:>10.4f} {lg['gather_s']:>12.5f} {rg['gather_s']:>13.5f} "
                  f"{rg['gather_s'] / lg['gather_s']:>8.2f}")
    print(f"\n{'mode':>8} {'ranks':>6} {'roots':>5} {'init s':>8} {'model s':>8} {'model/meas':>10} {'RSS MiB':>8} {'MiB/rank':>8}")
    for k in sorted(best, key=lambda k: (k[1], k[2], k[3])):
        if k[1] not in ("threads", "procs") and not k[1].startswith("netns"):
            continue
        r, n = best[k], k[2]
        pred = model.here(n, k[3], "threads" if k[1] == "threads" else "procs")
        tag = "" if n <= FIT_MAX else "  (predicted, not fitted)"
        print(f"{k[1]:>8} {n:>6} {k[3]:>5} {r['init_s']:>8.3f} {pred:>8.3f} {pred / r['init_s']:>10.2f} "
              f"{r['rss_mib']:>8.1f} {r['rss_mib'] / n:>8.2f}{tag}")
    for f in failed:
        print("#", f)
    print(f"\n## Fit (n <= {FIT_MAX}, P = {model.P} cores, G = {G}, log gathers from {LOG_MIN} ranks)")
    print(f"t_in  {model.t_in * 1e6:8.1f} us per check-in at the root")
    print(f"t_hop {model.t_hop * 1e6:8.1f} us CPU per ring step")
    print(f"t_msg {model.t_msg * 1e6:8.1f} us CPU per log-gather message (connect, MAC, digest, accept)")
    for mode, t in model.t_loc.items():
        print(f"t_loc {t * 1e3:8.1f} ms per-rank work ({mode}), plus {model.t0[mode] * 1e3:.1f} ms once, "
              f"t_peer {model.t_peer[mode] * 1e6:.1f} us per rank per peer")
    print(f"\n## One core per rank, LAT {LAT * 1e6:.0f} us one-way, RTT {RTT * 1e6:.0f} us")
    for n in (1024, 100000):
        for roots in (1, max(1, math.ceil(n / 256))):
            for log in (True, False):
                parts = model.cluster(n, roots, log)
                text = ", ".join(f"{k} {v:.3f}" for k, v in parts.items())
                print(f"{n:>6} ranks {roots:>4} roots {'log ' if log else 'ring'}: {sum(parts.values()):7.2f} s ({text})")
    print("(one root above NCCL_UID_STAGGER_THRESHOLD ranks also paces check-ins at NCCL_UID_STAGGER_RATE:"
          f" +{100000 / 7000:.1f} s at 100,000 ranks)")


if __name__ == "__main__":
    main()
