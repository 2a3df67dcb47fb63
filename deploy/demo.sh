#!/usr/bin/env bash
# The minewatch demo on a fresh machine: installs what is missing (Debian's mosquitto; minewatch
# and its Python dependencies, see deploy/python-env.sh), then runs `minewatch demo`: yesterday
# afternoon at the Dovre quarry, simulated through a real broker and the daemon, with the
# compliance summary, notices and an evidence bundle at the end.
#   ./deploy/demo.sh                         # writes ./demo-output/ (replacing its own earlier one)
#   ./deploy/demo.sh --date 2026-12-15       # a chosen day
#   ./deploy/demo.sh --scenario dovre-day    # a whole day (slower: several minutes)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v mosquitto >/dev/null 2>&1 && [ ! -x /usr/sbin/mosquitto ]; then
  echo "Installing Mosquitto (Debian package mosquitto)..."
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends mosquitto >/dev/null
fi
# shellcheck source=deploy/python-env.sh
source deploy/python-env.sh
minewatch_python
# Run again, the demo replaces its own ./demo-output (marked as the demo's, holding nothing
# else; `minewatch demo` checks both). A folder given with --out is replaced only with --force.
force=(--force)
for arg in "$@"; do case "$arg" in --out|--out=*) force=() ;; esac; done
exec "$PY" -m monitor.cli demo "${force[@]}" "$@"
