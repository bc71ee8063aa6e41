#!/usr/bin/env bash
# Build and test the wheel on a Python this machine's Debian lacks (CPython 3.14, PyPy), in a Debian chroot:
#   packaging/chroot-test.sh SUITE PYTHON [PYTEST ARGS...]
#   e.g. packaging/chroot-test.sh sid python3.14 -p no:randomly -q; packaging/chroot-test.sh trixie pypy3 -q
# Needs root and debootstrap; downloads a Debian root (about 500 MB with the interpreter and a C compiler) into
# $CHROOT (default /var/tmp/rpcwire-chroot-SUITE, outside the repository) once, then reuses it. The repository,
# ~/.cargo and ~/.rustup are bind-mounted at their own paths, so the host's Rust toolchain builds the wheel
# (maturin, --profile versions) into build/chroot-dist/, and packaging/test-wheel.sh tests it. Not run by CI.
# TEST_WHEEL_SKIP="granian" leaves out requirements with no wheel for that Python (their tests skip).
set -euo pipefail
suite=$1
python=$2
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
chroot=${CHROOT:-/var/tmp/rpcwire-chroot-$suite}
case "$python" in
    pypy3*) packages="pypy3 pypy3-dev pypy3-venv" ;;
    *) packages="$python $python-dev $python-venv" ;;
esac

if [ ! -x "$chroot/usr/bin/apt-get" ]; then
    debootstrap --variant=minbase --include=ca-certificates "$suite" "$chroot" http://deb.debian.org/debian
fi
# The host's extra CAs (a proxy's), an archive snapshot whose Release file may have expired, the host's resolver.
cp /usr/local/share/ca-certificates/*.crt "$chroot/usr/local/share/ca-certificates/" 2>/dev/null || true
echo 'Acquire::Check-Valid-Until "false";' > "$chroot/etc/apt/apt.conf.d/99no-valid-until"
cp /etc/resolv.conf "$chroot/etc/"

mounts=()
bind() { mkdir -p "$chroot$2"; mount "${@:3}" "$1" "$chroot$2"; mounts=("$chroot$2" "${mounts[@]}"); }
cleanup() { for mount in "${mounts[@]}"; do umount -l "$mount" || true; done; }
trap cleanup EXIT
bind proc /proc -t proc
bind /dev /dev --bind
bind "$root" "$root" --bind
bind "$HOME/.cargo" /root/.cargo --bind
bind "$HOME/.rustup" /root/.rustup --bind

# Inside: a venv with maturin (from the chroot's python3), the wheel, then the suite on it.
chroot "$chroot" env -i HOME=/root LANG=C.UTF-8 PATH=/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    CARGO_HOME=/root/.cargo RUSTUP_HOME=/root/.rustup CARGO_TARGET_DIR=/build/target \
    TEST_WHEEL_SKIP="${TEST_WHEEL_SKIP:-}" bash -euo pipefail -c '
    packages=$1 python=$2 root=$3; shift 3
    update-ca-certificates >/dev/null
    if ! command -v "$python" >/dev/null || [ ! -x /build/tools/bin/maturin ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $packages \
            python3-venv gcc g++ libc6-dev pkg-config libssl-dev >/dev/null
        python3 -m venv /build/tools && /build/tools/bin/pip install --quiet "$(grep -E "^maturin\b" "$root/requirements-dev.txt")"
    fi
    "$python" -VV
    mkdir -p /build && cd "$root" && rm -rf "build/chroot-dist/$python"
    /build/tools/bin/maturin build --profile versions --quiet -i "$python" --out "build/chroot-dist/$python"
    packaging/test-wheel.sh build/chroot-dist/"$python"/*.whl "$python" "$@"
' chroot-test "$packages" "$python" "$root" "$@"
