#!/usr/bin/env bash
# The fresh-machine lane (by hand, as root; not part of CI's time): README's two commands in a minimal Debian
# bookworm, as a new user has it (debootstrap --variant=minbase: no compiler, CMake, git, kubectl or package lists),
# each timed, with its result. Catches what this machine has and a fresh one lacks (issue 29: /usr/bin/kubectl).
#   scripts/fresh-debian.sh                 # both commands (the test command takes 30-60 minutes on 2 cores)
#   scripts/fresh-debian.sh demo            # only scripts/demo.sh
#   FRESH_ROOT=/var/tmp/x scripts/fresh-debian.sh test
# The chroot gets what a real install has and minbase leaves out: /etc/hosts with localhost, the host's DNS, Debian's
# ca-certificates and the CA certificates this machine trusts beyond them (its local CA folder), or pip fails on TLS.
# Last line: RESULT fresh_demo_s=.. fresh_demo_rc=.. fresh_test_s=.. fresh_test_rc=.. (a command not run: "-").
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FRESH_ROOT="${FRESH_ROOT:-/var/tmp/torus-fresh-debian}"
WHAT="${1:-all}"
case "$WHAT" in all | demo | test) ;; *) echo "usage: $0 [all|demo|test]" >&2; exit 2 ;; esac
[[ "$(id -u)" == 0 ]] || { echo "$0: run as root (debootstrap, chroot, mounts)" >&2; exit 2; }

command -v debootstrap >/dev/null || { apt-get update -qq; apt-get install -y -qq debootstrap >/dev/null; }

cleanup() {
  for m in sys dev/pts dev proc; do umount -l "$FRESH_ROOT/$m" 2>/dev/null || true; done
  umount -l "$FRESH_ROOT" 2>/dev/null || true
}
trap cleanup EXIT

# A mount left under it (a run killed before its cleanup) would make rm -rf reach into the host's /dev or /proc.
if findmnt -rn -o TARGET | grep -q "^$FRESH_ROOT\(/\|$\)"; then
  echo "$0: something is still mounted under $FRESH_ROOT (findmnt | grep $FRESH_ROOT); unmount it first" >&2
  exit 2
fi
rm -rf "$FRESH_ROOT"
echo "# debootstrap --variant=minbase --include=ca-certificates bookworm $FRESH_ROOT"
debootstrap --variant=minbase --include=ca-certificates bookworm "$FRESH_ROOT" >/dev/null
printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' >"$FRESH_ROOT/etc/hosts"
cp /etc/resolv.conf "$FRESH_ROOT/etc/resolv.conf"
if compgen -G "/usr/local/share/ca-certificates/*" >/dev/null; then
  mkdir -p "$FRESH_ROOT/usr/local/share/ca-certificates"
  cp -r /usr/local/share/ca-certificates/. "$FRESH_ROOT/usr/local/share/ca-certificates/"
  chroot "$FRESH_ROOT" update-ca-certificates >/dev/null
fi
# The repository as a user's clone of main (committed files only), made from the host: minbase has no git.
git clone -q "$ROOT" "$FRESH_ROOT/root/torus"
# A machine's / is a mount point, a chroot's folder is not: the stand-in's pods (a private mount namespace, then
# pivot_root) need one, as they have on any real machine.
mount --bind "$FRESH_ROOT" "$FRESH_ROOT"
mount -t proc proc "$FRESH_ROOT/proc"
mount --rbind /dev "$FRESH_ROOT/dev"
mount -t sysfs sys "$FRESH_ROOT/sys"

declare -A secs=([demo]=- [test]=-) rcs=([demo]=- [test]=-)
run_in_chroot() {  # run_in_chroot NAME COMMAND
  local start rc=0
  start=$(date +%s)
  echo "# $2 (in the chroot, log $FRESH_ROOT/root/$1.log)"
  chroot "$FRESH_ROOT" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    bash -c "cd /root/torus && $2" >"$FRESH_ROOT/root/$1.log" 2>&1 || rc=$?
  secs[$1]=$(($(date +%s) - start))
  rcs[$1]=$rc
  echo "# $1: exit $rc after ${secs[$1]} s; last lines:"
  tail -5 "$FRESH_ROOT/root/$1.log"
}
if [[ "$WHAT" != test ]]; then run_in_chroot demo "scripts/demo.sh"; fi
if [[ "$WHAT" != demo ]]; then run_in_chroot test "scripts/test.sh"; fi
echo "RESULT fresh_demo_s=${secs[demo]} fresh_demo_rc=${rcs[demo]} fresh_test_s=${secs[test]} fresh_test_rc=${rcs[test]}"
