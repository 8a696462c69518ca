#!/usr/bin/env bash
# What benchmarks/vs_nats.py measures against, installed when missing: Debian's
# nats-server, the Go toolchain and nats.go's sources (Debian packages Go libraries as
# sources under /usr/share/gocode), a C compiler for our load client, taskset; and
# PyPI's nats-py. Idempotent: apt-get and pip run only for what is not there.
set -euo pipefail

packages=()
command -v cc >/dev/null || packages+=(gcc)
command -v taskset >/dev/null || packages+=(util-linux)
command -v nats-server >/dev/null || packages+=(nats-server)
command -v go >/dev/null || packages+=(golang-go)
[ -d /usr/share/gocode/src/github.com/nats-io/nats.go ] ||
    packages+=(golang-github-nats-io-go-nats-dev)

if [ ${#packages[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
        echo "peers: missing Debian packages ${packages[*]}:" \
            "run as root: apt-get install -y ${packages[*]}" >&2
        exit 2
    fi
    echo "peers: installing ${packages[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${packages[@]}"
fi

python="${PYTHON:-python3}"
if ! "$python" -c "import nats" 2>/dev/null; then
    echo "peers: installing nats-py"
    "$python" -m pip install --quiet nats-py
fi
echo "peers: $(nats-server --version), $(go version | cut -d' ' -f3), nats-py $("$python" -c \
    'import nats.aio.client as c; print(c.__version__)')"
