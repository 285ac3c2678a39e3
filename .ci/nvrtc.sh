#!/usr/bin/env bash
# Makes NVRTC (libnvrtc.so.13) available without a CUDA toolkit, GPU or driver, so that the CUDA
# kernels can be compiled in CI (tests/cuda_kernels.rs).
#
# Installs PyPI's nvidia-cuda-nvrtc if it is missing, then prints ONE line on stdout: the folder
# to add to LD_LIBRARY_PATH. Everything else goes to stderr. Usage:
#
#   export LD_LIBRARY_PATH="$(bash .ci/nvrtc.sh)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
set -euo pipefail

python=${PYTHON:-python3}

# The lib folder of the installed wheel (nvidia/cu13/lib), or nothing.
nvrtc_lib_dir() {
  "$python" - <<'EOF' 2>/dev/null || true
import glob, os
try:
    import nvidia
except ImportError:
    raise SystemExit(0)
for root in nvidia.__path__:
    for lib in sorted(glob.glob(os.path.join(root, "cu*", "lib", "libnvrtc.so.*"))):
        print(os.path.dirname(lib))
        raise SystemExit(0)
EOF
}

dir=$(nvrtc_lib_dir | head -n 1)
if [ -z "$dir" ]; then
  echo "nvrtc.sh: installing nvidia-cuda-nvrtc from PyPI" >&2
  "$python" -m pip install --quiet nvidia-cuda-nvrtc >&2
  dir=$(nvrtc_lib_dir | head -n 1)
fi
if [ -z "$dir" ] || [ ! -d "$dir" ]; then
  echo "nvrtc.sh: nvidia-cuda-nvrtc is installed but no libnvrtc.so.* was found in it" >&2
  exit 1
fi
echo "nvrtc.sh: NVRTC at $dir" >&2
echo "$dir"
