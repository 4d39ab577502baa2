#!/usr/bin/env python3
"""Reads the per-step clock traces of the coopmat GEMM tiles (`ALPHA_VK_TILE_TRACE=1 ALPHA_VK_TRACE_DIR=d alpha bench
gpu --tiles`: trace_<case>_<tile>.bin, 260 uvec4 per workgroup: 4 per-subgroup headers (SM id, steps, first clock,
last clock), then 4 x 64 steps of (step start, slices stored, slices complete, products issued)) and prints where a
K step's clocks go, how many workgroups share an SM at once, and whether co-resident workgroups run in phase.
Usage: python3 scripts/gpu/tile_trace.py d/trace_*.bin"""
import statistics as st
import struct
import sys

M32 = 1 << 32


def load(path):
    raw = open(path, "rb").read()
    wgs = []
    for w in range(len(raw) // 4160):
        words = struct.unpack_from("<1040I", raw, w * 4160)
        heads = [words[4 * s: 4 * s + 4] for s in range(4)]
        sm, steps = heads[0][0], heads[0][1]
        if steps == 0 or steps > 100000:
            continue
        sgs = []
        for s in range(4):
            base = 16 + 4 * 64 * s
            sgs.append([words[base + 4 * i: base + 4 * i + 4] for i in range(min(steps, 64))])
        wgs.append({"sm": sm, "steps": steps, "first": heads[0][2], "last": heads[0][3], "sgs": sgs,
                    "heads": heads})
    return wgs


def d(a, b):  # b - a on the 32-bit clock
    return (b - a) % M32


def report(path):
    wgs = load(path)
    if not wgs:
        print(path, "no workgroups")
        return
    load_st, bar1, prod, bar2, total, skew = [], [], [], [], [], []
    for w in wgs:
        for s in range(4):
            steps = w["sgs"][s]
            for i, (c0, c1, c2, c3) in enumerate(steps):
                if i == 0:
                    continue  # the first step also waits for the workgroup's launch
                load_st.append(d(c0, c1))
                bar1.append(d(c1, c2))
                prod.append(d(c2, c3))
                if i + 1 < len(steps):
                    bar2.append(d(c3, steps[i + 1][0]))
                    total.append(d(c0, steps[i + 1][0]))
        # arrival skew at the slices-complete barrier: spread of the subgroups' c1 per step
        for i in range(1, min(w["steps"], 64)):
            c1s = [w["sgs"][s][i][1] for s in range(4)]
            ref = c1s[0]
            rel = [((c - ref + M32 // 2) % M32) - M32 // 2 for c in c1s]
            skew.append(max(rel) - min(rel))
    med = lambda v: st.median(v) if v else float("nan")
    print(f"{path}: {len(wgs)} workgroups, {wgs[0]['steps']} K steps")
    print(f"  per K step (median clocks, subgroup view): loads+stores {med(load_st):.0f}, wait for slices "
          f"{med(bar1):.0f}, products issued {med(prod):.0f}, wait before next stores {med(bar2):.0f}, "
          f"step {med(total):.0f}; store-arrival skew {med(skew):.0f}")
    # Co-residency per SM: the workgroups' [first, last] intervals on the SM's clock.
    by_sm = {}
    for w in wgs:
        by_sm.setdefault(w["sm"], []).append(w)
    conc_time = {}
    wg_len = []
    phase_both_mma = phase_one = 0
    for sm, ws in by_sm.items():
        ref = min(w["first"] for w in ws)
        ev = []
        for w in ws:
            a, b = d(ref, w["first"]), d(ref, w["last"])
            wg_len.append(b - a)
            ev += [(a, 1), (b, -1)]
        ev.sort()
        cur, prev = 0, ev[0][0]
        for t, e in ev:
            conc_time[cur] = conc_time.get(cur, 0) + t - prev
            cur += e
            prev = t
    tot = sum(v for k, v in conc_time.items() if k > 0)
    print(f"  SMs {len(by_sm)}, workgroups per SM {len(wgs) / len(by_sm):.1f}, workgroup life median "
          f"{med(wg_len):.0f} clocks; time with n resident: " +
          ", ".join(f"{k}: {100 * v / tot:.0f}%" for k, v in sorted(conc_time.items()) if k > 0))
    # Phase overlap of co-resident pairs: fraction of subgroup 0's product phases overlapping the other's.
    over, tot_p = 0, 0
    for sm, ws in by_sm.items():
        ref = min(w["first"] for w in ws)
        iv = []
        for w in ws:
            steps = w["sgs"][0]
            iv.append([(d(ref, c2), d(ref, c3), d(ref, c0), d(ref, c1)) for c0, c1, c2, c3 in steps[1:]])
        for i in range(len(iv)):
            for j in range(len(iv)):
                if i == j or not iv[i] or not iv[j]:
                    continue
                if iv[j][0][2] > iv[i][-1][1] or iv[i][0][2] > iv[j][-1][1]:
                    continue  # not co-resident
                for (p0, p1, _, _) in iv[i]:
                    tot_p += p1 - p0
                    for (q0, q1, _, _) in iv[j]:
                        over += max(0, min(p1, q1) - max(p0, q0))
    if tot_p:
        print(f"  product phases overlapping a co-resident workgroup's product phases: {100 * over / tot_p:.0f}%")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        report(p)
