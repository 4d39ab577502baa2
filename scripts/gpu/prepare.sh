#!/usr/bin/env bash
# Here, not on the GPU machine: fills the ignored folder gpu/ with what the scripts in scripts/gpu need there (the
# GPU machine has no Vulkan loader, no Debian libraries and no registry access): this build's binaries, every shared
# library `alpha` and the tests link beyond the C/C++ runtime (the large ones and the tests xz-compressed; setup.sh
# unpacks them), the validation layer, the configs, the benchmark data and the PyTorch peers, and the loader packages
# in .gl (../shared/tools/gpu-loaders.sh). Then carry [".gl", "gpu"]. Usage: bash scripts/gpu/prepare.sh [BUILD_DIR]
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
build=${1:-build}
grep -qx '/gpu/' .git/info/exclude 2>/dev/null || echo '/gpu/' >> .git/info/exclude
[ -d .gl ] || bash ../shared/tools/gpu-loaders.sh >/dev/null
rm -rf gpu && mkdir -p gpu/lib gpu/layers gpu/configs
cp "$build/alpha" gpu/
for t in test_vk test_vk_gpt test_vk_shapes test_vk_attention test_vk_adamw test_vk_muon test_vk_f16 test_vk_llama; do
  [ ! -f "$build/tests/$t" ] || cp "$build/tests/$t" gpu/
done
# Libraries of the binaries, less the runtime the GPU machine's newer glibc/libstdc++ provide.
for b in gpu/alpha gpu/test_vk*; do ldd "$b"; done | awk '/=> \//{print $3}' | sort -u |
  grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux-x86-64)\.so' |
  while read -r lib; do cp -L "$lib" gpu/lib/; done
for big in gpu/lib/* gpu/test_vk*; do [ "$(stat -c %s "$big")" -lt 1000000 ] || xz -f "$big"; done
cp /usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so gpu/layers/ && xz -f gpu/layers/*.so
sed 's|"library_path": *"[^"]*"|"library_path": "./libVkLayer_khronos_validation.so"|' \
  /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json > gpu/layers/VkLayer_khronos_validation.json
cp configs/*.json gpu/configs/
cp ../shared/bench/torch_gpt.py ../shared/data/tinyshakespeare.txt gpu/
cp scripts/gpu/*.sh scripts/gpu/*.py gpu/
du -sh gpu .gl
