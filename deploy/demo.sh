#!/usr/bin/env bash
# The minewatch demo on a fresh machine: installs what is missing (Debian's mosquitto, this
# package), then runs `minewatch demo`: a simulated afternoon at the Dovre quarry through a real
# broker and the daemon, with the compliance summary, notices and an evidence bundle at the end.
#   ./deploy/demo.sh                         # writes ./demo-output/
#   ./deploy/demo.sh --scenario dovre-day    # a whole day (slower: several minutes)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v mosquitto >/dev/null 2>&1 && [ ! -x /usr/sbin/mosquitto ]; then
  echo "Installing Mosquitto (Debian package mosquitto)..."
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends mosquitto >/dev/null
fi
if ! python3 -c "import monitor.demo" >/dev/null 2>&1; then
  echo "Installing minewatch (pip install -e .)..."
  python3 -m pip install -q -e .
fi
exec python3 -m monitor.cli demo "$@"
