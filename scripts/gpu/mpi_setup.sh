# Sourced by the MPI scripts here (not run alone): the Vulkan loader (.gl), then Debian's OpenMPI from
# gpu-mpi/debs/*.deb unpacked into a private prefix (the host's own MPI libraries, if any, are another version and
# crash Debian's mpirun), relocated by OPAL_PREFIX; sets MPIRUN and the library path (gpu/lib too).
for f in .gl/*.deb; do [ -f "$f" ] && dpkg -x "$f" / >/dev/null; done; ldconfig 2>/dev/null
R=$PWD/mpiroot; mkdir -p $R; for f in gpu-mpi/debs/*.deb; do dpkg -x $f $R; done
export OPAL_PREFIX=$R/usr PMIX_MCA_mca_base_component_path=$R/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
MPILIB=$R/usr/lib/x86_64-linux-gnu:$R/usr/lib/x86_64-linux-gnu/openmpi/lib:$R/usr/lib/x86_64-linux-gnu/pmix2/lib
for x in gpu/lib/*.xz; do [ -f "${x%.xz}" ] || xz -dk "$x"; done  # libopenblas, libdnnl, ... (prepare.sh)
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json LD_LIBRARY_PATH=$MPILIB:$PWD/gpu/lib
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=$R/usr/bin/orterun
