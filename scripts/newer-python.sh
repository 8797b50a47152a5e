#!/usr/bin/env bash
# Runs the Python suites on Pythons newer than the 3.11 that CI and this machine have: the abi3
# wheel claims every CPython from 3.11 on, and the GPU machine runs Python 3.12 with NumPy 2.5
# (which needs Python >= 3.12, so CI never meets it). Not part of scripts/test.sh: it needs
# other Pythons, and for versions named by number root (debootstrap, chroot, bind mounts) and
# Debian's package mirror.
#
#   sudo scripts/newer-python.sh [VERSION | INTERPRETER ...]    default: 3.13 3.14 3.15
#
# A VERSION (3.14) runs in a Debian chroot that has it (CAI_DEBIAN_SUITE, default sid; kept
# in CAI_CHROOT, default /opt/cai-<suite>, and reused). An INTERPRETER, a path
# (/root/.pyenv/versions/3.12.1/bin/python3: Debian has no 3.12 any more, and the GPU machine
# runs 3.12), runs here, with no root, in a venv in target/newer-python/.
#
# Builds here what the suites need (the abi3 wheel, the GPU bundle, the libcuda stub and the
# emulated driver, the NumPy oracle). Then, for each Python, in a venv with NumPy (CAI_NUMPY,
# default numpy==2.5.2, the GPU machine's; the newest NumPy if that has no wheel for the
# version) and the test requirements' pytest and hypothesis (and xarray, ml_dtypes and
# apache-tvm-ffi where they install):
# the host pytest suite (tests/python) and the GPU bundle against the emulated driver. Exits
# non-zero if any of them fails.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
suite=${CAI_DEBIAN_SUITE:-sid}
root=${CAI_CHROOT:-/opt/cai-$suite}
numpy=${CAI_NUMPY:-numpy==2.5.2}
if [ $# -gt 0 ]; then pythons=("$@"); else pythons=(3.13 3.14 3.15); fi
versions=()
for p in "${pythons[@]}"; do
    if [[ $p == */* ]]; then
        [ -x "$p" ] || { echo "newer-python.sh: $p is no interpreter"; exit 2; }
    else
        versions+=("$p")
    fi
done

if [ ${#versions[@]} -gt 0 ] && [ "$(id -u)" != 0 ]; then
    echo "newer-python.sh needs root for versions given by number (${versions[*]}): it makes a Debian chroot (debootstrap) and bind-mounts the repo into it; interpreters given by path need none"
    exit 2
fi

echo "== building the wheel, the GPU bundle, the emulated driver and the NumPy oracle"
maturin=$( [ -x .venv/bin/maturin ] && echo .venv/bin/maturin || echo maturin )
rm -rf dist
"$maturin" build --release -m cai-py/Cargo.toml --features testing -o dist -q
scripts/gpu-bundle.sh gpu-bundle >/dev/null
scripts/cuda-stub.sh --emulator target/cuda-emu
cargo build -q -p cai-oracle
# The stub libcuda (test_no_driver.py imports the package against it).
source scripts/cuda-env.sh

# Runs the command line $2 where the Python $1 is: in the chroot for a version, here for a path.
run() {
    if [[ $1 == */* ]]; then
        env -u PYTHONPATH -u VIRTUAL_ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
            PYTHONDONTWRITEBYTECODE=1 bash -c "$2"
    else
        chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
            PIP_CERT=/etc/ssl/certs/host-ca.crt PIP_DISABLE_PIP_VERSION_CHECK=1 \
            PYTHONDONTWRITEBYTECODE=1 bash -c "$2"
    fi
}

if [ ${#versions[@]} -gt 0 ]; then
    packages=()
    for v in "${versions[@]}"; do packages+=("python$v" "python$v-venv"); done
    if [ ! -x "$root/usr/bin/apt-get" ]; then
        command -v debootstrap >/dev/null || apt-get install -y -q debootstrap
        echo "== debootstrap $suite into $root"
        debootstrap --variant=minbase --include="$(IFS=,; echo "${packages[*]}")" \
            "$suite" "$root" http://deb.debian.org/debian >"$root.log" 2>&1 \
            || { tail -20 "$root.log"; exit 1; }
    fi

    mkdir -p "$root/repo"
    trap 'umount "$root/repo" "$root/proc" "$root/dev" 2>/dev/null || true' EXIT
    mount --bind "$repo" "$root/repo"
    mount -t proc proc "$root/proc"
    mount --bind /dev "$root/dev"
    # This machine's certificates (a registry proxy may sign with its own) and resolver.
    cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/host-ca.crt"
    cp /etc/resolv.conf "$root/etc/resolv.conf"

    missing=()
    for p in "${packages[@]}"; do [ -e "$root/usr/share/doc/$p" ] || missing+=("$p"); done
    if [ ${#missing[@]} -gt 0 ]; then
        # The mirror may serve a snapshot older than its Release file's Valid-Until.
        run "${versions[0]}" "apt-get -o Acquire::Check-Valid-Until=false update -q >/dev/null \
            && apt-get install -y -q ${missing[*]} >/dev/null" \
            || { echo "cannot install ${missing[*]} from Debian $suite"; exit 1; }
    fi
fi

tools=$(grep -E '^(pytest|hypothesis)==' tests/python/requirements.txt | tr '\n' ' ')
# (Each where it installs for that Python; the tests of one that does not are skipped.)
optional=$(grep -E '^(xarray|ml_dtypes|apache-tvm-ffi)==' tests/python/requirements.txt | tr '\n' ' ')
status=0
for p in "${pythons[@]}"; do
    # at: the repo where the commands run; python: the interpreter making the venv.
    if [[ $p == */* ]]; then
        at=$repo python=$p
        venv=$repo/target/newer-python/$("$p" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
    else
        at=/repo python=python$p venv=/opt/venv$p
    fi
    echo "== Python $p"
    run "$p" "set -e
        [ -x $venv/bin/python ] || $python -m venv $venv
        $venv/bin/pip install -q '$numpy' 2>/dev/null || $venv/bin/pip install -q numpy
        $venv/bin/pip install -q $tools
        for o in $optional; do
            $venv/bin/pip install -q \$o 2>/dev/null || echo \"   (no \$o here: its tests are skipped)\"
        done
        $venv/bin/pip install -q --no-deps --force-reinstall $at/dist/cai_arrays-*-abi3-*.whl
        $venv/bin/python -c 'import sys, numpy; print(\"   Python\", sys.version.split()[0], \"NumPy\", numpy.__version__)'" \
        || { status=1; continue; }
    echo "-- tests/python"
    run "$p" "cd $at && CAI_ORACLE=$at/target/debug/cai-oracle \
        LD_LIBRARY_PATH=$at/target/cuda-stub/lib64 \
        $venv/bin/python -m pytest -q -p no:cacheprovider tests/python" || status=1
    echo "-- the GPU bundle against the emulated driver"
    run "$p" "cd $at && LD_LIBRARY_PATH=$at/target/cuda-emu/lib64 CAI_GPU_SUITE_EMULATED=1 \
        CAI_GPU_SUITE_STEPS='rust pytest' PATH=$venv/bin:\$PATH bash gpu-bundle/run.sh" \
        | grep -E '(^| )[0-9]+ (passed|failed)|GPU suite exit status' || status=1
done
echo "newer-python.sh: exit status $status (Pythons ${pythons[*]}${versions[*]:+; Debian $suite for ${versions[*]}})"
exit $status
