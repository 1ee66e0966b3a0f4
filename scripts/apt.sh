# Sourced by the scripts that install what they need from Debian:
#   apt_install LABEL PACKAGE...
# installs the packages named (nothing when none is), quietly, through
# sudo when not root, with apt as the machine has it configured.
apt_install() {
  local label="$1"
  shift
  [ "$#" -gt 0 ] || return 0
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "$label: installing $*" >&2
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
