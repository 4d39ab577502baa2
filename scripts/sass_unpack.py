#!/usr/bin/env python3
"""Unpacks the NVIDIA driver's shader disk caches that `gpu/kernel_sass.sh collect` brought back: each cache .bin
holds zstd frames (magic 28 b5 2f fd) after per-entry headers; the entries with an EXIT instruction hold machine code.

Usage: python3 scripts/sass_unpack.py caches.tgz OUT_DIR   (needs the zstd command; writes <cache>_<entry>.raw)
Then carry OUT_DIR as gpu/sassraw and run `bash gpu/kernel_sass.sh dis` on the GPU machine.
"""
import glob
import os
import re
import subprocess
import sys
import tarfile
import tempfile

MAGIC = bytes.fromhex("28b52ffd")
EXIT = bytes.fromhex("4d79000000000000")


def frames(data):
    starts = [m.start() for m in re.finditer(re.escape(MAGIC), data)]
    for i, s in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(data)
        for cut in range(0, 128):  # the next entry's header follows the frame: trim it away
            r = subprocess.run(["zstd", "-d", "-q", "-c"], input=data[s:end - cut], capture_output=True)
            if r.returncode == 0:
                yield i, r.stdout
                break


def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(src) as t:
            t.extractall(tmp)
        for cache in sorted(glob.glob(os.path.join(tmp, "caches", "*", ""))):
            label = os.path.basename(cache.rstrip("/"))
            for b in glob.glob(os.path.join(cache, "**", "*.bin"), recursive=True):
                for i, raw in frames(open(b, "rb").read()):
                    if EXIT in raw:
                        path = os.path.join(out, f"{label}_e{i}.raw")
                        open(path, "wb").write(raw)
                        print(path, len(raw))


if __name__ == "__main__":
    main()
