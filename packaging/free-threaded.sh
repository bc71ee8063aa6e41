#!/usr/bin/env bash
# rpcwire on free-threaded CPython (3.14t), as root:
#   packaging/free-threaded.sh test [PYTEST ARGS...]   the wheel built for 3.14t, the whole suite on it
#   packaging/free-threaded.sh bench [BENCH ARGS...]   bench/threads_bench.py on 3.14t and on the GIL build, side by side
#
# Debian's archive ships no free-threaded interpreter, so this builds one from its python3.14 source package:
# in a Debian sid chroot made as packaging/chroot-test.sh makes one (CHROOT, default /var/tmp/rpcwire-chroot-sid,
# shared with `chroot-test.sh sid`), the python3.14 the archive's Sources index names (VERSION=3.14.7 to
# choose), or where the pool no longer (or not yet) holds that one the newest patch release below it the pool
# serves (its sha256 printed), is fetched with apt-helper: the upstream tarball, python3.14_*.orig.tar.xz, configured
# twice, `--disable-gil` into /opt/python3.14t and with the GIL into
# /opt/python3.14 (the second only for bench: the same source, flags and compiler, so the two columns differ by the
# GIL alone). No --enable-shared (maturin links no libpython on Linux; a static interpreter is a little faster) and
# no PGO (the build stays ~5 minutes a build on 2 cores, and both columns are built alike). Each build is done once
# and reused; rm -rf "$CHROOT/opt/python3.14t" to rebuild.
#
# The repository, ~/.cargo and ~/.rustup are bind-mounted at their own paths, so the host's Rust builds the wheel
# as the release workflow does (maturin --release: with the quick `versions` profile, no LTO, the decoder's
# recursive frame is larger and deep input on a 256 KiB thread stack gets -32700) into build/chroot-dist/python3.14t/ (python3.14/ for the GIL build), and
# packaging/test-wheel.sh tests it. TEST_WHEEL_SKIP="granian|..." leaves out requirements with no wheel for 3.14t
# (their tests skip). Not run by CI: make test-free-threaded and make bench-threads call it.
set -euo pipefail
mode=${1:?usage: packaging/free-threaded.sh test|bench [ARGS...]}
shift
case "$mode" in test | bench) ;; *) echo "free-threaded.sh: unknown mode $mode (test or bench)" >&2; exit 2 ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
chroot=${CHROOT:-/var/tmp/rpcwire-chroot-sid}
[ "$(id -u)" = 0 ] || { echo "free-threaded.sh: needs root (debootstrap, chroot, bind mounts)" >&2; exit 1; }

if [ ! -x "$chroot/usr/bin/apt-get" ]; then
    debootstrap --variant=minbase --include=ca-certificates sid "$chroot" http://deb.debian.org/debian
fi
cp /usr/local/share/ca-certificates/*.crt "$chroot/usr/local/share/ca-certificates/" 2>/dev/null || true
echo 'Acquire::Check-Valid-Until "false";' > "$chroot/etc/apt/apt.conf.d/99no-valid-until"
cp /etc/resolv.conf "$chroot/etc/"
# debootstrap's minbase writes no /etc/hosts: without it "localhost" does not resolve (the HTTPS tests' name).
[ -s "$chroot/etc/hosts" ] || printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' > "$chroot/etc/hosts"
# The source index too (apt-get source); the binary lines debootstrap wrote are left as they are.
echo 'deb-src http://deb.debian.org/debian sid main' > "$chroot/etc/apt/sources.list.d/rpcwire-src.list"

mounts=()
bind() { mkdir -p "$chroot$2"; mount "${@:3}" "$1" "$chroot$2"; mounts=("$chroot$2" "${mounts[@]}"); }
cleanup() { for mount in "${mounts[@]}"; do umount -l "$mount" || true; done; }
trap cleanup EXIT
bind proc /proc -t proc
bind /dev /dev --bind
bind "$root" "$root" --bind
bind "$HOME/.cargo" /root/.cargo --bind
bind "$HOME/.rustup" /root/.rustup --bind

chroot "$chroot" env -i HOME=/root LANG=C.UTF-8 PATH=/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    CARGO_HOME=/root/.cargo RUSTUP_HOME=/root/.rustup TEST_WHEEL_SKIP="${TEST_WHEEL_SKIP:-}" VERSION="${VERSION:-}" \
    bash -euo pipefail -c '
    mode=$1 root=$2; shift 2
    update-ca-certificates >/dev/null
    if [ ! -x /usr/bin/gcc ] || [ ! -f /usr/include/openssl/ssl.h ]; then
        apt-get update -qq
        # What the interpreter needs for the modules pip and the suite use (ssl, zlib, ctypes, sqlite3 for coverage
        # and hypothesis, lzma, bz2, zstd), and what the wheel needs (a C compiler and linker for the build scripts).
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc g++ make libc6-dev \
            pkg-config xz-utils libssl-dev zlib1g-dev libffi-dev libsqlite3-dev liblzma-dev libbz2-dev libzstd-dev \
            uuid-dev libreadline-dev >/dev/null
    fi
    # build PREFIX CONFIGURE-ARGS...: the interpreter, once.
    build() {
        local prefix=$1; shift
        [ -x "$prefix/bin/${prefix##*/}" ] && return 0
        if [ ! -d /build/src/python ]; then
            rm -rf /build/src && mkdir -p /build/src && cd /build/src
            apt-get update -qq
            # The newest upstream version the index names, else (its files may not be in the pool yet, or any more)
            # the newest patch release below it whose tarball the pool still serves.
            local newest=${VERSION:-$(apt-cache showsrc python3.14 | sed -n "s/^Version: //p" | sort -V | tail -n 1)}
            local upstream=${newest%%-*} patch
            for patch in $(seq "${upstream##*.}" -1 0); do
                version=${upstream%.*}.$patch
                /usr/lib/apt/apt-helper download-file \
                    "http://deb.debian.org/debian/pool/main/p/python3.14/python3.14_$version.orig.tar.xz" \
                    "python3.14_$version.orig.tar.xz" >/dev/null 2>&1 && break
                version=
            done
            [ -n "$version" ] || { echo "no python3.14 source tarball in the archive pool" >&2; exit 1; }
            echo "=== python3.14 $version from the archive pool (the index names $newest):" \
                "$(sha256sum "python3.14_$version.orig.tar.xz")"
            mkdir python && tar -xf "python3.14_$version.orig.tar.xz" -C python --strip-components 1
        fi
        echo "=== building $prefix ($*)"
        rm -rf "/build/obj${prefix}" && mkdir -p "/build/obj${prefix}" && cd "/build/obj${prefix}"
        /build/src/python/configure --prefix="$prefix" --with-ensurepip=install "$@" > configure.log
        make -j"$(nproc)" > make.log 2>&1 || { tail -n 40 make.log; exit 1; }
        make install > install.log 2>&1 || { tail -n 40 install.log; exit 1; }
    }
    build /opt/python3.14t --disable-gil
    [ "$mode" = bench ] && build /opt/python3.14
    # wheel PYTHON: the wheel built for it (its own cargo target dir: PyO3 is built per interpreter).
    wheel() {
        local python=$1 name; name=$(basename "$1")
        [ -x /build/tools/bin/maturin ] || { /opt/python3.14t/bin/python3.14t -m venv /build/tools \
            && /build/tools/bin/pip install --quiet "$(grep -E "^maturin\b" "$root/requirements-dev.txt")"; }
        rm -rf "$root/build/chroot-dist/$name"
        (cd "$root" && CARGO_TARGET_DIR=/build/target-release-$name /build/tools/bin/maturin build --release --quiet \
            -i "$python" --out "build/chroot-dist/$name" >&2)
        ls "$root/build/chroot-dist/$name"/*.whl
    }
    /opt/python3.14t/bin/python3.14t -VV
    /opt/python3.14t/bin/python3.14t -c "import sys; assert not sys._is_gil_enabled(), \"not free-threaded\""
    ft_wheel=$(wheel /opt/python3.14t/bin/python3.14t)
    if [ "$mode" = test ]; then
        exec "$root/packaging/test-wheel.sh" "$ft_wheel" /opt/python3.14t/bin/python3.14t "$@"
    fi
    # bench: a venv per interpreter with its wheel, then the benchmark on each; the table compares them.
    gil_wheel=$(wheel /opt/python3.14/bin/python3.14)
    results=() out="$root/build/bench-threads"
    mkdir -p "$out"
    for pair in "python3.14t:$ft_wheel" "python3.14:$gil_wheel"; do
        name=${pair%%:*} whl=${pair#*:}
        venv=/build/bench-$name
        rm -rf "$venv" && "/opt/$name/bin/$name" -m venv "$venv" && "$venv/bin/pip" install --quiet "$whl"
        (cd / && "$venv/bin/python" "$root/bench/threads_bench.py" --json "$out/$name.json" "$@")
        results+=("$out/$name.json")
    done
    /build/bench-python3.14t/bin/python "$root/bench/threads_bench.py" --compare "${results[@]}" \
        --out "$out/results.json" | tee "$out/results.md"
' free-threaded "$mode" "$root" "$@"
