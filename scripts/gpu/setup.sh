# Sourced by the scripts here (not run alone): unpacks the Vulkan loader (.gl), the xz-compressed libraries and
# the validation layer carried in gpu/, and points the NVIDIA Vulkan driver and the loader at them.
for f in .gl/*.deb; do [ -f "$f" ] && dpkg -x "$f" / >/dev/null; done; ldconfig 2>/dev/null
for x in gpu/*.xz gpu/lib/*.xz gpu/layers/*.xz; do
  [ ! -f "$x" ] || [ -f "${x%.xz}" ] || xz -dk "$x"
done
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json LD_LIBRARY_PATH=$PWD/gpu/lib \
  VK_LAYER_PATH=$PWD/gpu/layers
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
