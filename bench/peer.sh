# shellcheck shell=bash
# Sourced by the benchmarks that run a PyTorch peer: which PyTorch that is.
#
# The peer is what a user would pick today: the newest `torch` from PyPI, installed by the bench (never by the tests)
# into a cached virtual environment, refreshed when PyPI has a newer release. PEER=debian runs Debian's python3-torch
# (1.13, oneDNN 2.x) instead, the peer of the figures before 2026-11-27; TORCH_PYTHON=/path/to/python runs that
# interpreter's torch. The RESULT lines name the peer (peer=torch-X.Y.Z), so figures of different peers are never
# mixed up.
#   TORUS_PEER_VENV   where the venv lives (default ~/.cache/torus/torch-venv; about 5.4 GB, 2.5 min to install)

# SMOKE=1 (bench/common.sh) never installs: the peer is Debian's python3-torch (what the test command installs) or
# TORCH_PYTHON's, and where neither imports torch the peer is skipped, said so: PYTHON empty, PEER_VERSION "none".

# Sets PYTHON (the interpreter that runs the peer) and PEER_VERSION (its torch.__version__). Called in the bench's
# own shell (not in $(...)), so the variables reach it.
bench_peer_python() {
  if [[ "${SMOKE:-0}" == 1 ]]; then
    PYTHON="${TORCH_PYTHON:-/usr/bin/python3}"
    if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
      echo "# PyTorch peer skipped: $PYTHON cannot import torch (a smoke runs the peer only where it is installed)"
      PYTHON=""
      PEER_VERSION=none
      return 0
    fi
  elif [[ -n "${TORCH_PYTHON:-}" ]]; then
    PYTHON="$TORCH_PYTHON"
  elif [[ "${PEER:-pypi}" == debian ]]; then
    PYTHON=/usr/bin/python3
  elif [[ "${PEER:-pypi}" == pypi ]]; then
    bench_peer_venv
    PYTHON="$TORUS_PEER_VENV/bin/python"
  else
    echo "PEER: expected pypi (the newest torch from PyPI, default) or debian, got '$PEER'" >&2
    return 2
  fi
  PEER_VERSION="$("$PYTHON" -c 'import torch; print(torch.__version__.split("+")[0])')" || {
    echo "$PYTHON cannot import torch" >&2
    return 2
  }
  echo "# PyTorch peer: torch $PEER_VERSION ($PYTHON)"
}

# Whether the peer runs (it does, except in a smoke without PyTorch), and its name for RESULT lines.
bench_has_peer() { [[ -n "$PYTHON" ]]; }
bench_peer_name() { if bench_has_peer; then echo "torch-$PEER_VERSION"; else echo none; fi; }

# The cached venv with the newest torch on PyPI (numpy too: the peers read the IDX files with it).
bench_peer_venv() {
  TORUS_PEER_VENV="${TORUS_PEER_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/torus/torch-venv}"
  if [[ ! -x "$TORUS_PEER_VENV/bin/python" ]]; then
    if ! /usr/bin/python3 -c 'import ensurepip' 2>/dev/null; then
      apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
    fi
    mkdir -p "$(dirname "$TORUS_PEER_VENV")"
    /usr/bin/python3 -m venv "$TORUS_PEER_VENV"
  fi
  local have newest
  have="$("$TORUS_PEER_VENV/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null || true)"
  # One look-up of the newest release; offline, the cached one serves.
  newest="$("$TORUS_PEER_VENV/bin/python" -m pip index versions torch 2>/dev/null |
    sed -n 's/^torch (\([^)]*\)).*/\1/p' || true)"
  if [[ -z "$have" || (-n "$newest" && "$have" != "$newest") ]]; then
    echo "# installing torch ${newest:-(newest)} from PyPI into $TORUS_PEER_VENV (once; a few minutes)" >&2
    "$TORUS_PEER_VENV/bin/python" -m pip install -q --upgrade "torch${newest:+==$newest}" numpy >&2
  fi
}
