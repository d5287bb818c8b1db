#!/usr/bin/env bash
# Install the peers measured by benchmarks/bench_peers.py (`make bench-peers-install`):
#   * servers from Debian packages: redis-server, rabbitmq-server, nats-server (only the missing ones);
#   * their Python clients (redis, pika, nats-py) into the project venv via the optional extra `bench`.
# The server step needs root and apt-get; without them it is skipped with a message and the clients are
# still installed (bench_peers then reports the peers whose server is missing as "not installed").
set -euo pipefail

cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"

# package -> a file it installs, to tell whether it is already there
declare -A MARKER=(
    [redis-server]=/usr/bin/redis-server
    [rabbitmq-server]=/usr/lib/rabbitmq/bin/rabbitmq-server
    [nats-server]=/usr/bin/nats-server
)

missing=()
for pkg in redis-server rabbitmq-server nats-server; do
    if [[ -x "${MARKER[$pkg]}" ]] || dpkg -s "$pkg" >/dev/null 2>&1; then
        echo "install_peers: $pkg already installed"
    else
        missing+=("$pkg")
    fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
    echo "install_peers: all peer servers present"
elif [[ "$(id -u)" -ne 0 ]]; then
    echo "install_peers: SKIPPED server packages (${missing[*]}): not root; run 'sudo $0' or install them yourself" >&2
elif ! command -v apt-get >/dev/null 2>&1; then
    echo "install_peers: SKIPPED server packages (${missing[*]}): no apt-get on this machine" >&2
else
    # The packages' postinst scripts would start system-wide services (redis on 6379, rabbitmq on 5672,
    # epmd); the benchmark starts its own servers on free ports, so service starts are denied during the
    # install with a temporary policy-rc.d (only when the machine has none of its own).
    policy=/usr/sbin/policy-rc.d
    if [[ ! -e "$policy" ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod +x "$policy"
        trap 'rm -f "$policy"' EXIT
    fi
    echo "install_peers: apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [[ ! -x "$VENV/bin/pip" ]]; then
    echo "install_peers: no venv at $VENV (run 'make venv' first)" >&2
    exit 1
fi
echo "install_peers: installing the Python clients (extra 'bench') into $VENV"
"$VENV/bin/pip" install -q -e '.[bench]'
