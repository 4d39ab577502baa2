#!/usr/bin/env python3
"""Where a GEMM kernel's global loads sit between its barriers: for each disassembled kernel that `gpu/kernel_sass.sh
dis` brought back (sass.tgz), the LDG, STS, LDSM and HMMA counts of every stretch of code between two BAR
instructions. A p0 tile's loop shows stretches of loads + stores and stretches of products; loads counted inside a
product stretch are the next K step's, issued while the current one multiplies (session 53: the driver does this for
the unrolled p0c loop, not for "fc").

Usage: python3 scripts/sass_phases.py sass.tgz [NAME_SUBSTRING]   (default: the tile kernels, entries named *_e6)
"""
import re
import sys
import tarfile

OPS = ("LDG", "STS", "LDSM", "HMMA")
INSTR = re.compile(r"^\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9]+)")


def phases(lines):
    """(counts per op) for each stretch between BARs, in code order."""
    out, cur = [], dict.fromkeys(OPS, 0)
    for line in lines:
        m = INSTR.match(line)
        if not m:
            continue
        op = m.group(1)
        if op == "BAR":
            out.append(cur)
            cur = dict.fromkeys(OPS, 0)
        elif op in cur:
            cur[op] += 1
    out.append(cur)
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    pick = sys.argv[2] if len(sys.argv) > 2 else "_e6"
    with tarfile.open(sys.argv[1]) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            if not member.name.endswith(".sass") or pick not in member.name:
                continue
            text = tar.extractfile(member).read().decode(errors="replace").splitlines()
            ph = phases(text)
            total = {op: sum(p[op] for p in ph) for op in OPS}
            print(f"{member.name.split('/')[-1]}: {len(ph) - 1} barriers, " + ", ".join(f"{total[o]} {o}" for o in OPS))
            for i, p in enumerate(ph):
                kind = "products" if p["HMMA"] > p["STS"] else ("stores" if p["STS"] else "other")
                print(f"  {i:3d} {kind:8s} " + " ".join(f"{o} {p[o]:3d}" for o in OPS))


if __name__ == "__main__":
    main()
