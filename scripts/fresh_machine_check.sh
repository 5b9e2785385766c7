#!/usr/bin/env bash
# Runs the README's two commands on a bare Debian 12, as a new user would: debootstraps a minimal
# bookworm (no CUDA toolkit, no compiler, no LibTorch), clones this repository into it, and runs
#   ./scripts/bench.sh --scenario resume_adam     (builds bench alone)
#   ./scripts/test.sh                             (builds the rest)
# inside it exactly as written, then both again (the warm, idempotent runs: nothing fetched,
# configured, compiled or linked), printing each time;
# then what CI adds, scripts/test_python.sh (the Python side: a 4.7 GB environment), cold and warm
# (WITH_PYTHON=0 skips it).
#
#   scripts/fresh_machine_check.sh [ROOT_DIR]     (default /var/tmp/harness-fresh-root)
#
# Needs root (debootstrap, chroot, mounts) and the network the machine has (Debian's mirror and
# PyPI). From the host it copies only the network settings every machine of this workplace has:
# the resolver, the hosts file, pip's and apt's configuration and the CA bundle. What it clones is
# the committed HEAD of this repository (commit first). ROOT_DIR is removed first and left behind
# afterwards for inspection; KEEP_ROOT=1 reuses an existing root (skips debootstrap, still clones
# anew).
# Environment: MIRROR (default: the host's Debian mirror or deb.debian.org).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
root=${1:-/var/tmp/harness-fresh-root}
say() { printf '[fresh] %s\n' "$*" >&2; }
die() { printf '[fresh] error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot and mounts)"
command -v debootstrap >/dev/null || {
  say "installing debootstrap"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null ||
    die "apt-get could not install debootstrap"
}
mirror=${MIRROR:-$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null)}
mirror=${mirror:-http://deb.debian.org/debian}

mounts=()
unmount_all() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[$i]}" 2>/dev/null || true; done
}
trap unmount_all EXIT

if [ "${KEEP_ROOT:-0}" = 1 ] && [ -x "$root/bin/bash" ]; then
  say "reusing the Debian root at $root"
else
  rm -rf "$root"
  say "debootstrap: a minimal bookworm into $root from $mirror"
  start=$(date +%s)
  debootstrap --variant=minbase --include=git,python3,ca-certificates bookworm "$root" "$mirror" \
    >"$root.debootstrap.log" 2>&1 || die "debootstrap failed (log: $root.debootstrap.log)"
  say "debootstrap took $(($(date +%s) - start)) s"
fi

# The workplace's network settings, as any machine here has them: the resolver, and the hosts file
# that resolves the machine's own name (debootstrap's does not; torchrun's and Gloo's rendezvous
# look that name up).
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp /etc/hosts "$root/etc/hosts"
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$root/etc/pip.conf"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
for f in /etc/apt/apt.conf.d/99*; do [ -f "$f" ] && cp "$f" "$root/etc/apt/apt.conf.d/"; done

for m in proc sys dev dev/pts; do
  mkdir -p "$root/$m"
  mount --bind "/$m" "$root/$m"
  mounts+=("$root/$m")
done

rm -rf "$root/root/harness"
git clone -q "$repo" "$root/root/harness"
say "cloned $(git -C "$repo" rev-parse --short HEAD) into $root/root/harness"

# A login-like environment: nothing of this shell's (no LD_LIBRARY_PATH, no CUDA paths).
in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_DISABLE_PIP_VERSION_CHECK=1 \
    /bin/bash -c "cd /root/harness && $1"
}
chroot "$root" /bin/sh -c 'command -v nvcc || ls /usr/local/cuda 2>/dev/null' >/dev/null &&
  die "the root has a CUDA toolkit; it must not"

results=()
run_timed() {
  local label=$1 cmd=$2 log start rc secs
  log="$root.$label.log"
  say "$label: $cmd (log: $log)"
  start=$(date +%s)
  set +e
  in_root "$cmd" >"$log" 2>&1
  rc=$?
  set -e
  secs=$(($(date +%s) - start))
  results+=("$(printf '%-10s %-48s exit %d  %dm%02ds' "$label" "$cmd" "$rc" $((secs / 60)) $((secs % 60)))")
  say "${results[-1]}"
  if [ "$rc" != 0 ]; then
    tail -n 40 "$log" >&2
    die "$label failed"
  fi
}
run_timed bench-cold './scripts/bench.sh --scenario resume_adam'
run_timed test-cold './scripts/test.sh'
run_timed bench-warm './scripts/bench.sh --scenario resume_adam'
run_timed test-warm './scripts/test.sh'
if [ "${WITH_PYTHON:-1}" = 1 ]; then
  run_timed python-cold './scripts/test_python.sh'
  run_timed python-warm './scripts/test_python.sh'
  if grep -hE '^\[(setup|python-env)\] (fetching|installing Debian|configuring|creating)' \
      "$root.python-warm.log" >&2; then
    die "the second Python run set something up again (lines above)"
  fi
fi

# Idempotent: the second runs fetch, install and configure nothing.
if grep -hE '^\[setup\] (fetching|installing|configuring)' "$root.bench-warm.log" "$root.test-warm.log" >&2; then
  die "the second runs set something up again (lines above)"
fi
# ... and compile and link nothing (ninja's lines; the git sha is checked on every build).
if grep -hE '(Building|Linking) CXX' "$root.bench-warm.log" "$root.test-warm.log" >&2; then
  die "the second runs built something again (lines above)"
fi
grep -E 'tests passed|tests failed' "$root.test-cold.log" | tail -n 1 >&2 || true
printf '\n%s\n' "fresh machine check passed (bookworm minbase root at $root, no CUDA toolkit):"
printf '  %s\n' "${results[@]}"
