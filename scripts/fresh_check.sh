#!/usr/bin/env bash
# Runs both README commands (scripts/demo.sh, then scripts/test.sh) in a fresh Debian 12 (bookworm) root made
# with debootstrap (minbase: not even python3), under unshare + chroot, on a clone of this repository's HEAD,
# so a missing install step shows here before it reaches a user. Slow (apt, ~5 GB of Python wheels, two
# builds without ccache, the tests, the demo) and not part of CI: run it before resolving an issue that
# touches setup. Needs root (debootstrap, chroot, mounts) and the Debian mirror.
#   scripts/fresh_check.sh [ROOT]        ROOT default /var/tmp/kc-fresh; the log: ROOT.log (each step's time)
#   KC_FRESH_STEPS="demo test"           which README commands to run (default both, in README order)
#   KC_FRESH_MIRROR=URL                  default http://deb.debian.org/debian
# Idempotent as the commands are: a finished debootstrap is reused (ROOT/.kc-debootstrap-done); the clone is
# made once (ROOT/root/kerncheck) and moved to HEAD on later runs, keeping its ignored outputs like a user's
# checkout (KC_FRESH_RECLONE=1: a new clone); the commands' own caches under ROOT persist.
# The demo's summary.json is copied to ROOT.summary.json (compare it with one made on another machine).
# Exit code: the first failing step's.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
root=${1:-/var/tmp/kc-fresh}
log=$root.log
mirror=${KC_FRESH_MIRROR:-http://deb.debian.org/debian}
steps=${KC_FRESH_STEPS:-demo test}
[ "$(id -u)" -eq 0 ] || { echo "fresh_check: needs root (debootstrap, chroot)" >&2; exit 2; }
mkdir -p "$(dirname "$root")"
t0=$(date +%s)
say() { echo "[fresh_check $(date -u +%H:%M:%S) +$(( $(date +%s) - t0 ))s] $*" | tee -a "$log"; }
# step NAME CMD…: runs CMD with its output in the log, then the step's time. A failed README command is
# recorded and the next one still runs (first_rc); a failed preparation step stops the check.
first_rc=0
step() {
  local name=$1 s rc
  shift
  s=$(date +%s)
  say "step $name: start"
  set +e
  "$@" >>"$log" 2>&1
  rc=$?
  set -e
  say "step $name: exit $rc after $(( $(date +%s) - s ))s"
  if [ "$rc" -ne 0 ]; then
    tail -n 40 "$log" >&2
    [[ "$name" == README* ]] || exit "$rc"
    [ "$first_rc" -ne 0 ] || first_rc=$rc
  fi
}
say "repo $repo at $(git -C "$repo" rev-parse --short HEAD), root $root, steps: $steps"

if ! command -v debootstrap >/dev/null; then
  step "host: apt-get install debootstrap" bash -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap'
fi
if [ ! -f "$root/.kc-debootstrap-done" ]; then
  rm -rf "$root"
  step "debootstrap bookworm (minbase)" debootstrap --variant=minbase bookworm "$root" "$mirror"
  # What a Debian 12 install's sources list holds: the release, its updates and security.
  cat >"$root/etc/apt/sources.list" <<SRC
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SRC
  touch "$root/.kc-debootstrap-done"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The host's CA bundle, where it has one: on a network whose TLS goes through an intercepting proxy, pip
# needs the proxy's CA, and a fresh machine on that network is given it the same way (PIP_CERT below).
ca_env=""
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  mkdir -p "$root/etc/ssl/certs"
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/kc-host-ca.crt"
  ca_env="PIP_CERT=/etc/ssl/certs/kc-host-ca.crt SSL_CERT_FILE=/etc/ssl/certs/kc-host-ca.crt"
fi
clone=$root/root/kerncheck
if [ -n "${KC_FRESH_RECLONE:-}" ] || [ ! -d "$clone/.git" ]; then
  rm -rf "$clone"
  step "clone HEAD" git clone -q --no-local "$repo" "$clone"
else  # a later run: the same clone moved to HEAD; ignored outputs (build/, .venv/, kerncheck-demo/) are kept
  step "update the clone to HEAD" bash -c "git -C '$clone' fetch -q '$repo' HEAD && git -C '$clone' reset -q --hard FETCH_HEAD && git -C '$clone' clean -qfd"
fi
say "clone at $(git -C "$clone" rev-parse --short HEAD)"

# in_root CMD: CMD (a bash -c string) in the root, in a private mount namespace (the mounts vanish with it).
in_root() {
  KC_CA_ENV=$ca_env unshare --mount --fork bash -c '
    r=$1; shift
    mount -t proc proc "$r/proc"
    mount --rbind /sys "$r/sys"
    mount --rbind /dev "$r/dev"
    exec chroot "$r" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      LANG=C.UTF-8 TERM=dumb $KC_CA_ENV bash -c "cd /root/kerncheck && $*"' _ "$root" "$@"
}
for s in $steps; do
  case $s in
    demo)
      step "README: bash scripts/demo.sh" in_root "bash scripts/demo.sh"
      if [ -f "$root/root/kerncheck/kerncheck-demo/summary.json" ]; then
        cp "$root/root/kerncheck/kerncheck-demo/summary.json" "$root.summary.json"
        say "demo summary: $root.summary.json"
      fi
      ;;
    test) step "README: bash scripts/test.sh" in_root "bash scripts/test.sh" ;;
    *) echo "fresh_check: KC_FRESH_STEPS: expected demo and/or test, got '$s'" >&2; exit 2 ;;
  esac
done
if [ "$first_rc" -eq 0 ]; then say "all steps passed in $(( $(date +%s) - t0 ))s"; else say "FAILED (first exit $first_rc) after $(( $(date +%s) - t0 ))s"; fi
exit "$first_rc"
