#!/usr/bin/env bash
# GPU machine: the NVIDIA driver's machine code (SASS) of the coopmat GEMM kernels, in two calls with a step here
# between (the driver's shader disk cache is zstd-compressed and the GPU machine has no zstd):
#   1. there: TILES="128x128w4k64s1 ..." GEMMS="4096,4096,4096,0,0 ..." bash gpu/kernel_sass.sh collect
#      runs one product per (tile, shape) with an empty cache each (__GL_SHADER_DISK_CACHE_PATH) -> $OUT/caches.tgz
#   2. here: python3 scripts/sass_unpack.py caches.tgz gpu/sassraw   (the cache entries that hold machine code)
#   3. there: bash gpu/kernel_sass.sh dis   disassembles gpu/sassraw/*.raw (nvdisasm --binary SM90) -> $OUT/sass.tgz,
#      and prints per kernel its HMMA, MOVM (register transposes), LDSM (ldmatrix), LDGSTS (cp.async), LDG and STS counts.
#   4. here: python3 scripts/sass_phases.py sass.tgz   (LDG, STS, LDSM, HMMA per stretch between barriers)
# The tile's own kernel is the largest entry of its cache (the bench's warm-up and f32 kernels are the others).
set -u
source "$(dirname "$0")/setup.sh" > /dev/null
case ${1:-} in
  collect)
    mkdir -p /tmp/caches
    for tile in ${TILES:-128x128w4k64s1}; do
      for g in ${GEMMS:-4096,4096,4096,0,0}; do
        c=/tmp/caches/${tile}_${g//,/_}; mkdir -p "$c"
        HOME=$c XDG_CACHE_HOME=$c __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=$c __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 \
          ALPHA_VK_CM_TILE=$tile timeout 60 gpu/alpha bench gpu --quick --only gemm --gemm "$g" > "$c.log" 2>&1 ||
          { echo "$tile $g: bench failed"; tail -3 "$c.log"; }
      done
    done
    (cd /tmp && tar czf "$OUT/caches.tgz" caches);;
  dis)
    mkdir -p /tmp/sass
    for f in gpu/sassraw/*.raw; do
      n=$(basename "$f" .raw)
      # Instructions are 16 bytes; the first EXIT (opcode 0x94d) fixes the alignment of the code in the entry.
      python3 -c "
d = open('$f', 'rb').read(); a = d.find(bytes.fromhex('4d79000000000000')) % 16; d = d[a:]
open('/tmp/x.bin', 'wb').write(d[:len(d) // 16 * 16])"
      nvdisasm --binary SM90 /tmp/x.bin > "/tmp/sass/$n.sass" 2>&1
      echo "$n: $(grep -c HMMA "/tmp/sass/$n.sass") HMMA, $(grep -c MOVM "/tmp/sass/$n.sass") MOVM, $(grep -c LDSM "/tmp/sass/$n.sass") LDSM, $(grep -c LDGSTS "/tmp/sass/$n.sass") LDGSTS, $(grep -cE '[[:space:]]LDG\.' "/tmp/sass/$n.sass") LDG, $(grep -cE '[[:space:]]STS\.' "/tmp/sass/$n.sass") STS"
    done
    (cd /tmp && tar czf "$OUT/sass.tgz" sass);;
  *) echo "usage: bash gpu/kernel_sass.sh collect|dis"; exit 2;;
esac
