#!/usr/bin/env python3
"""Tables of bench/compare.sh: busbw (GB/s) of Weft and each peer per size, the best peer, the
Weft/best-peer ratio and the goal it is held to, one table per pass and rank count. busbw uses
nccl-tests' factors for the collective in RESULTS_DIR/coll.txt (all-reduce when absent); runs
named weft-* (weft-ring: WEFT_DIRECT=0) are Weft's other paths, shown beside it, not peers. Then
the steadiness tables: per size, each one's median and best time over the launches of a 20-call
test, median/best, and Weft's median against the best peer's median.

Usage: report.py RESULTS_DIR   (RESULTS_DIR/pass<P>/<name>-<n>ranks.txt, memroof.txt, busy.txt;
RESULTS_DIR/steady*/<name>-run<R>.txt)"""
import math
import os
import re
import sys


COLL = "allreduce"
# nccl-tests' bus bandwidth factors: algbw x factor is what each rank's link carries.
FACTORS = {"allreduce": lambda n: 2 * (n - 1) / n, "allgather": lambda n: (n - 1) / n,
           "reducescatter": lambda n: (n - 1) / n, "broadcast": lambda n: 1, "reduce": lambda n: 1}


def busbw(nbytes, us, n):
    return nbytes / (us * 1e-6) / 1e9 * FACTORS[COLL](n) if us > 0 else 0.0


def keep_best(rows, b, us, wrong):
    """rows[b] = (the best time, the most wrong results) over the rows seen for b."""
    old = rows.get(b, (math.inf, 0))
    rows[b] = (min(us, old[0]), max(wrong, old[1]))


def parse_peer(path):
    """bytes -> (best_us, wrong) from a driver's 'bytes best_us median_us wrong' rows (of every
    launch in the file: the best time, the most wrong results)."""
    rows = {}
    for line in open(path, errors="replace"):
        f = line.split()
        if len(f) == 4 and not line.startswith("#") and f[0].isdigit():
            keep_best(rows, int(f[0]), float(f[1]), int(f[3]))
    return rows


def parse_weft(path):
    """bytes -> (best us over the launches and -N cycles, wrong) from a perf binary's table (its
    "# precise" copy when compare.sh wrote one): the out-of-place column, but the in-place one for
    broadcast, whose MPI peer has one buffer (MPI_Bcast)."""
    rows, precise = {}, {}
    col = 9 if COLL == "broadcast" else 5
    for line in open(path, errors="replace"):
        f = line.split()
        if len(f) == 6 and f[:2] == ["#", "precise"]:  # the same rows from -J, to six digits
            keep_best(precise, int(f[2]), float(f[4] if COLL == "broadcast" else f[3]), int(f[5]))
        elif len(f) >= 13 and f[0].isdigit() and f[2] == "float":
            wrong = 0 if f[8] == "N/A" else int(f[8]) + (0 if f[12] == "N/A" else int(f[12]))
            keep_best(rows, int(f[0]), float(f[col]), wrong)
    return precise or rows


def human(b):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= div and b % div == 0:
            return "%d%s" % (b // div, unit)
    return "%d" % b


def goal(n, b):
    """(minimum Weft/best-peer ratio, minimum fraction of the roof) for n ranks at b bytes."""
    if n == 2:
        if b >= 16 << 20:
            return 2.0, 0.5 if COLL == "allreduce" else 0.0
        if b >= 64 << 10:
            return 1.2, 0.0
        if b <= 4096:
            return 1.0, 0.0
        return None, 0.0
    return 1.0, 0.0


def fmt(x):
    if x == 0:
        return "-"
    return "%.3g" % x if x < 100 else "%.0f" % x


def table(passdir, n, roof_gbs, out):
    files = sorted(f for f in os.listdir(passdir) if f.endswith("-%dranks.txt" % n))
    if not files:
        return 0, 0
    names = [f[: -len("-%dranks.txt" % n)] for f in files]
    data = {}
    for name, f in zip(names, files):
        path = os.path.join(passdir, f)
        data[name] = parse_weft(path) if name.startswith("weft") else parse_peer(path)
    peers = [x for x in names if not x.startswith("weft")]
    wefts = [x for x in names if x.startswith("weft-")]
    sizes = sorted(set().union(*[set(d) for d in data.values()]))
    roof = roof_gbs * (n - 1) / (n * n) if roof_gbs else 0
    note = launches_note(os.path.join(passdir, files[0])) + busy_note(passdir)
    if COLL == "allreduce":
        out.write("\n%s, %d ranks (roof %.1f GB/s busbw = %.1f GB/s memory x (n-1)/n^2)%s\n\n"
                  % (os.path.basename(passdir), n, roof, roof_gbs, note))
    else:
        out.write("\n%s, %s, %d ranks (memory %.1f GB/s)%s\n\n"
                  % (os.path.basename(passdir), COLL, n, roof_gbs, note))
    out.write("| size | weft | " + "".join(w + " | weft/" + w + " | " for w in wefts)
              + " | ".join(peers) + " | best peer | weft/best | goal | met |\n")
    out.write("|---:" * (len(peers) + 2 * len(wefts) + 6) + "|\n")
    met = total = 0
    for b in sizes:
        bw = {k: busbw(b, data[k][b][0], n) if b in data[k] else 0 for k in names}
        wrong = any(data[k][b][1] for k in names if b in data[k])
        best_name = max(peers, key=lambda k: bw[k]) if peers else None
        best = bw[best_name] if best_name else 0
        ratio = bw.get("weft", 0) / best if best else 0
        g, roof_frac = goal(n, b)
        cells = [human(b), fmt(bw.get("weft", 0))]
        for w in wefts:
            cells += [fmt(bw[w]), "%.2f" % (bw.get("weft", 0) / bw[w]) if bw[w] else "-"]
        cells += [fmt(bw[k]) for k in peers]
        cells += ["%s %s" % (fmt(best), best_name or ""), "%.2f" % ratio if ratio else "-"]
        if g is None:
            cells += ["", ""]
        else:
            ok = ratio >= g and (roof_frac == 0 or bw.get("weft", 0) >= roof_frac * roof)
            met += ok
            total += 1
            want = ">= %.1fx" % g + (", >= %.1f GB/s" % (roof_frac * roof) if roof_frac else "")
            cells += [want, "yes" if ok else "**no**"]
        if wrong:
            cells[0] += " (WRONG RESULTS)"
        out.write("| " + " | ".join(cells) + " |\n")
    out.write("\nGoals met: %d of %d sizes\n" % (met, total))
    return met, total


def launches_note(path):
    """How many launches of each the pass made (compare.sh's ROUNDS), as its files record."""
    k = sum(1 for line in open(path, errors="replace") if line.startswith("# launch "))
    return "; best of %d launches of each" % k if k > 1 else ""


def busy_note(d):
    try:
        return "; " + open(os.path.join(d, "busy.txt")).read().strip()
    except OSError:
        return ""


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def steady_table(sdir, out):
    """Per size: median and best us over the runs of each name, median/best, Weft/best peer."""
    runs = {}
    for f in sorted(os.listdir(sdir)):
        m = re.match(r"(.+)-run\d+\.txt$", f)
        if not m:
            continue
        name = m.group(1)
        rows = (parse_weft if name == "weft" else parse_peer)(os.path.join(sdir, f))
        for b, (us, wrong) in rows.items():
            runs.setdefault(name, {}).setdefault(b, []).append(us)
    if "weft" not in runs:
        return
    peers = sorted(x for x in runs if x != "weft")
    nruns = max(len(v) for v in runs["weft"].values())
    out.write("\n%s: 2 ranks, %d launches of a 20-call test, time per call in us (median, best of the "
              "launches)%s\n\n" % (os.path.basename(sdir), nruns, busy_note(sdir)))
    out.write("| size | weft median | weft best | weft median/best | "
              + " | ".join("%s median | %s median/best" % (p, p) for p in peers)
              + " | weft/best peer (medians) |\n")
    out.write("|---:" * (4 + 2 * len(peers) + 1) + "|\n")
    for b in sorted(runs["weft"]):
        w = runs["weft"][b]
        cells = [human(b), fmt(median(w)), fmt(min(w)), "%.2f" % (median(w) / min(w))]
        best_peer = math.inf
        for p in peers:
            v = runs[p].get(b, [])
            if v:
                best_peer = min(best_peer, median(v))
                cells += [fmt(median(v)), "%.2f" % (median(v) / min(v))]
            else:
                cells += ["-", "-"]
        cells.append("%.2f" % (median(w) / best_peer) if best_peer < math.inf else "-")
        out.write("| " + " | ".join(cells) + " |\n")


def main():
    global COLL
    res = sys.argv[1]
    try:
        COLL = open(os.path.join(res, "coll.txt")).read().strip() or COLL
    except OSError:
        pass
    passes = sorted((d for d in os.listdir(res) if re.match(r"pass\d+$", d)), key=lambda d: int(d[4:]))
    out = sys.stdout
    for p in passes:
        pdir = os.path.join(res, p)
        roof = 0.0
        try:
            for line in open(os.path.join(pdir, "memroof.txt")):
                if line.startswith("memroof_gbs"):
                    roof = float(line.split()[1])
        except OSError:
            pass
        for n in sorted({int(m.group(1)) for f in os.listdir(pdir) for m in [re.search(r"-(\d+)ranks\.txt$", f)] if m}):
            table(pdir, n, roof, out)
    for d in sorted(d for d in os.listdir(res) if re.match(r"steady", d)):
        steady_table(os.path.join(res, d), out)


if __name__ == "__main__":
    main()
