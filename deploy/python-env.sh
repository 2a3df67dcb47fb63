# Sourced by deploy/demo.sh and .ci/run: choose a Python that has minewatch and everything it
# needs, installing it when something is missing.  Usage: minewatch_python [EXTRA]; sets $PY.
#
# "Installed" is decided from the installed distributions (importlib.metadata, run from / so the
# source folder itself cannot answer): the minewatch distribution and every requirement in this
# checkout's pyproject.toml (and the EXTRA's). Importing `monitor` from the checkout would
# succeed without any of its dependencies, which is how a fresh clone used to fail.
#
# Where: the active virtual environment if there is one; else ./.venv if it exists; else the
# system python3, unless it refuses pip (PEP 668 "externally managed", as on Debian 12) or has
# no pip, in which case ./.venv is created (Debian package python3-venv, installed if missing).

_mw_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

_mw_sudo() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# Prints the missing distributions and fails if any; silent and true when all are there.
_mw_missing() {  # PYTHON EXTRA
  (cd / && "$1" - "$_mw_root/pyproject.toml" "$2" <<'PYCODE'
import importlib.metadata as md
import re
import sys
import tomllib

with open(sys.argv[1], "rb") as handle:
    project = tomllib.load(handle)["project"]
wanted = list(project["dependencies"])
if sys.argv[2]:
    wanted += project["optional-dependencies"][sys.argv[2]]
names = ["minewatch"] + [re.match(r"[A-Za-z0-9_.-]+", req).group(0) for req in wanted]
missing = []
for name in names:
    try:
        md.distribution(name)
    except md.PackageNotFoundError:
        missing.append(name)
print(" ".join(missing))
sys.exit(1 if missing else 0)
PYCODE
  )
}

_mw_make_venv() {
  if ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then
    echo "Installing python3-venv (Debian package) to make ./.venv ..."
    _mw_sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive _mw_sudo apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
  fi
  echo "Creating a virtual environment in $_mw_root/.venv ..."
  python3 -m venv "$_mw_root/.venv"
}

minewatch_python() {  # [EXTRA]
  local extra="${1:-}" target="."
  [ -n "$extra" ] && target=".[$extra]"
  if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then
    PY="$VIRTUAL_ENV/bin/python"
  elif [ -x "$_mw_root/.venv/bin/python" ]; then
    PY="$_mw_root/.venv/bin/python"
  else
    PY="$(command -v python3)"
  fi
  local missing
  if missing="$(_mw_missing "$PY" "$extra")"; then
    return 0
  fi
  if [ -z "${VIRTUAL_ENV:-}" ] && [ "$PY" = "$(command -v python3)" ] && {
       ! "$PY" -m pip --version >/dev/null 2>&1 ||
       "$PY" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))'
     }; then
    _mw_make_venv
    PY="$_mw_root/.venv/bin/python"
  fi
  echo "Installing minewatch and its dependencies into $("$PY" -c 'import sys; print(sys.prefix)')"
  echo "  (missing: ${missing:-minewatch}; pip install -e '$target')"
  (cd "$_mw_root" && "$PY" -m pip install -q -e "$target")
}
