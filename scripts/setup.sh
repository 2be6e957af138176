#!/usr/bin/env bash
# Install what gpuhost needs on Debian 12 (as root): OpenSSH server (for the lab and the
# tests; never started on 0.0.0.0:22), sudo (the become test), python3-venv, and a virtualenv in .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive

need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v unshare >/dev/null || need+=(util-linux)
command -v curl >/dev/null || need+=(curl)                # lab nodes fetch NVIDIA installers with it
command -v gcc >/dev/null || need+=(gcc libc6-dev)        # the lab compiles its simulated libcuda
command -v sudo >/dev/null || need+=(sudo)                # ssh.become's test (tests/integration/test_operator_become.py)
python3 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  # apt must not start sshd (it would listen on 0.0.0.0:22): policy-rc.d says no. A policy
  # that was there before is put back afterwards; with none, ours stays (and says why).
  saved=""
  if [ -e /usr/sbin/policy-rc.d ]; then saved=$(mktemp); cp -p /usr/sbin/policy-rc.d "$saved"; fi
  printf '#!/bin/sh\n# gpuhost: keep apt from starting services such as sshd on 0.0.0.0:22\nexit 101\n' \
    > /usr/sbin/policy-rc.d
  chmod 755 /usr/sbin/policy-rc.d
  trap '[ -z "$saved" ] || mv -f "$saved" /usr/sbin/policy-rc.d' EXIT
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${need[@]}"
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test,plot,docs]"

# The lab's offline Python package index carries real wheels, fetched once into a cache: uv, the SGLang
# Model Gateway (smg, pinned) and huggingface_hub with their dependencies (Debian 12's 3.11, 13's 3.13).
wheels=${GPUHOST_LAB_WHEEL_CACHE:-/var/cache/gpuhost-lab/wheels}
if ! ls "$wheels"/uv-*.whl >/dev/null 2>&1; then
  mkdir -p "$wheels"
  .venv/bin/python -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: -d "$wheels" uv
fi
if ! ls "$wheels"/smg-1.13.0-*.whl >/dev/null 2>&1; then
  mkdir -p "$wheels"
  labpy=$(python3 -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
  .venv/bin/python -m pip download -q --disable-pip-version-check --only-binary=:all: \
    --python-version "$labpy" --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 \
    -d "$wheels" smg==1.13.0
fi
if ! ls "$wheels"/huggingface_hub-*.whl >/dev/null 2>&1; then
  mkdir -p "$wheels"
  for py in 3.11 3.13; do
    .venv/bin/python -m pip download -q --disable-pip-version-check --only-binary=:all: --implementation cp \
      --python-version "$py" --platform manylinux2014_x86_64 -d "$wheels" huggingface_hub
  done
fi

# The flag-table test re-extracts SGLang's flags from real wheels (tests/unit/serve/test_extract_wheel.py): the
# wheels and the extractor's real dependencies are fetched here, once, so that the tests download nothing.
sglwheels=${GPUHOST_SGLANG_WHEEL_CACHE:-/var/cache/gpuhost/sglang-wheels}
for v in 0.5.9 0.5.23; do
  if ! ls "$sglwheels"/sglang-"$v"-*.whl >/dev/null 2>&1; then
    mkdir -p "$sglwheels"
    .venv/bin/python -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
      --python-version 3.11 --platform manylinux_2_34_x86_64 --platform any -d "$sglwheels" "sglang==$v"
  fi
done
flagdeps=${GPUHOST_SGLANG_FLAG_DEPS:-/var/cache/gpuhost/sglang-flag-deps}
if ! [ -d "$flagdeps/msgspec" ] || ! [ -d "$flagdeps/packaging" ] || ! [ -d "$flagdeps/dill" ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check --target "$flagdeps" msgspec packaging dill
fi
