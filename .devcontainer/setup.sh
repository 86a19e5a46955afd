#!/bin/sh
# The development container's set-up, run once when VS Code or Codespaces creates the container
# (devcontainer.json's postCreateCommand): the repository's own `make install`, which makes .venv with
# the course's locked versions, as `make test` does on any machine. It needs make and Python 3.11 or
# newer with its venv module; as root on Debian or Ubuntu it installs those with apt where they are
# missing, elsewhere it says what to install. TORCH_INDEX, where set, is passed on to make.
set -eu
cd "$(dirname "$0")/.."

need=""
command -v make >/dev/null 2>&1 || need="$need make"
if ! command -v python3 >/dev/null 2>&1; then
    need="$need python3 python3-venv"
elif ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    need="$need python3-venv"
fi
if [ -n "$need" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        log="${TMPDIR:-/tmp}/devcontainer-apt.log"
        echo "setup: installing$need with apt-get (its output: $log)"
        if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need; } >"$log" 2>&1; then
            echo "setup: apt-get could not install$need; the end of its output, $log:" >&2
            tail -n 20 "$log" >&2
            exit 1
        fi
    else
        echo "setup: this needs$need: install them (on Debian or Ubuntu: sudo apt-get install$need), then run" \
             "sh .devcontainer/setup.sh again" >&2
        exit 1
    fi
fi
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "setup: the course needs Python 3.11 or newer; python3 here is $(python3 --version 2>&1)" >&2
    exit 1
fi
make install
echo "setup: done; run make test"
