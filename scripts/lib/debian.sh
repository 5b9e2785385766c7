# Sourced by the set-up scripts (setup.sh, python_env.sh); the caller defines say and die.
#   as_root CMD...                   runs CMD as root (directly, or through sudo)
#   install_debian_packages [--no-recommends] PKG...
#                                    installs those of PKG that are missing (apt-get; an update
#                                    first only when the plain install fails); --no-recommends
#                                    leaves out the packages they only recommend

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    die "need root to run: $*"; fi
}

install_debian_packages() {
  local missing=() p options=(-y -q)
  if [ "${1:-}" = --no-recommends ]; then
    options+=(--no-install-recommends)
    shift
  fi
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  say "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get install "${options[@]}" "${missing[@]}" >/dev/null ||
    { as_root apt-get update -q >/dev/null && as_root apt-get install "${options[@]}" "${missing[@]}" >/dev/null; } ||
    die "apt-get could not install: ${missing[*]}"
}
