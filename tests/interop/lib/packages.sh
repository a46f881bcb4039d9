# Debian packages the harness needs, installed through a private apt configuration.
#
# Why private: the machine's own sources may lack bookworm-backports, and QEMU must come from
# there (bookworm's qemu-system-x86 7.2 would replace the installed qemu-utils 10.0.2), and other
# configured repositories may be unreachable. So apt runs with its own sources list, lists
# directory and archive cache under $CACHE/apt: nothing in /etc/apt or /var/lib/apt/lists changes.
# Only dpkg's database (the installed packages) is shared with the machine.

APT_PKGS_MAIN="busybox-static ibverbs-utils ibverbs-providers rdma-core rdmacm-utils perftest
  iproute2 iputils-ping tcpdump tshark kmod cpio socat xz-utils file"
APT_PKGS_BPO="qemu-system-x86 qemu-utils"
APT_DIR=$CACHE/apt
APT_OPTS=()

apt_setup() {
  private_apt_setup "$APT_DIR" bookworm bookworm-updates bookworm-backports bookworm-security || return 1
  mapfile -t APT_OPTS < <(private_apt_opts "$APT_DIR")
}

# private_apt_setup DIR SUITE...: DIR's folders and a sources.list of Debian's SUITEs (main)
private_apt_setup() {
  local d=$1 s kr=/usr/share/keyrings/debian-archive-keyring.gpg; shift
  mkdir -p "$d/lists/partial" "$d/archives/partial"
  [ -f "$kr" ] || { err "packages: $kr missing (package debian-archive-keyring)"; return 1; }
  for s in "$@"; do
    case $s in
      *-security) echo "deb [signed-by=$kr] http://deb.debian.org/debian-security $s main" ;;
      *) echo "deb [signed-by=$kr] http://deb.debian.org/debian $s main" ;;
    esac
  done > "$d/sources.list"
}

# private_apt_opts DIR [OPTION...]: apt-get's options for a configuration kept in DIR (its
# sources.list, lists and archives), one a line.
private_apt_opts() {
  local d=$1; shift
  printf '%s\n' -o "Dir::Etc::SourceList=$d/sources.list" -o "Dir::Etc::SourceParts=$d/none.d" \
    -o "Dir::State::Lists=$d/lists" -o "Dir::Cache::Archives=$d/archives" \
    -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache=" -o "APT::Get::List-Cleanup=0" "$@" -q
}

# pkg_missing PKG...: prints the packages that are not installed.
pkg_missing() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || printf '%s ' "$p"
  done
}

apt_updated=
apt_update_once() {
  [ -n "$apt_updated" ] && return 0
  # `apt-get update` exits 0 even when an index failed to download; treat any error line as fatal.
  local out rc=0
  out=$(apt-get "${APT_OPTS[@]}" update 2>&1) || rc=$?
  if [ $rc -ne 0 ] || grep -qE '^(E:|W: (Failed|Some index))' <<<"$out"; then
    printf '%s\n' "$out" | tail -5
    err "packages: apt-get update failed (rc=$rc)"
    return 1
  fi
  apt_updated=1
}

install_packages() {
  apt_setup || return 1
  local main bpo
  main=$(pkg_missing $APT_PKGS_MAIN)
  # QEMU must be 10.x from backports: an installed 7.2 from bookworm counts as missing.
  bpo=$(pkg_missing $APT_PKGS_BPO)
  if [ -z "$bpo" ] && ! dpkg --compare-versions "$(dpkg-query -W -f='${Version}' qemu-system-x86)" ge 1:10; then
    bpo=$APT_PKGS_BPO
  fi
  if [ -z "$main$bpo" ]; then
    info "all packages present (qemu $(dpkg-query -W -f='${Version}' qemu-system-x86))"
    return 0
  fi
  info "installing: $main$bpo"
  apt_update_once || return 1
  export DEBIAN_FRONTEND=noninteractive
  # tshark asks whether non-root users may capture; answer no, without a prompt.
  echo 'wireshark-common wireshark-common/install-setuid boolean false' | debconf-set-selections
  if [ -n "$bpo" ]; then
    apt-get "${APT_OPTS[@]}" install -y --no-install-recommends -t bookworm-backports $bpo \
      >"$LOGDIR/apt-bpo.log" 2>&1 || { tail -5 "$LOGDIR/apt-bpo.log"; err "packages: installing $bpo from bookworm-backports failed"; return 1; }
  fi
  if [ -n "$main" ]; then
    apt-get "${APT_OPTS[@]}" install -y --no-install-recommends $main \
      >"$LOGDIR/apt-main.log" 2>&1 || { tail -5 "$LOGDIR/apt-main.log"; err "packages: installing $main failed"; return 1; }
  fi
  rm -f "$APT_DIR"/archives/*.deb   # installed: the downloads are not needed again
  local still; still=$(pkg_missing $APT_PKGS_MAIN $APT_PKGS_BPO)
  [ -z "$still" ] || { err "packages: still missing after install: $still"; return 1; }
  info "qemu $(dpkg-query -W -f='${Version}' qemu-system-x86)"
}

# apt_download PKG DIR: fetch PKG's .deb into DIR (no install).
apt_download() {
  apt_setup || return 1
  apt_update_once || return 1
  (cd "$2" && apt-get "${APT_OPTS[@]}" download "$1") >"$LOGDIR/apt-download.log" 2>&1 \
    || { tail -3 "$LOGDIR/apt-download.log"; err "packages: apt-get download $1 failed"; return 1; }
}

# kernel_package: the linux-image-6.1.0-N-amd64 that linux-image-amd64 (bookworm) depends on.
# Uses the private lists as they are (no network) unless they are empty.
kernel_package() {
  apt_setup || return 1
  local k
  k=$(apt-cache "${APT_OPTS[@]}" depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-6\.1\./ { print $2; exit }')
  if [ -z "$k" ]; then
    apt_update_once >&2 || return 1
    k=$(apt-cache "${APT_OPTS[@]}" depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-6\.1\./ { print $2; exit }')
  fi
  [ -n "$k" ] || { err "packages: linux-image-amd64 has no linux-image-6.1 dependency in bookworm" >&2; return 1; }
  printf '%s\n' "$k"
}

# ---- Debian trixie's perftest (25.01) for the guest's second userland (/opt/p25) ----
# Downloaded only (apt-get download, never installed): apt runs with its own trixie sources,
# lists and an empty dpkg status under $CACHE/apt-trixie, so neither the machine's apt state nor
# its installed packages are involved.
P25_PKGS="perftest ibverbs-utils ibverbs-providers libibverbs1 librdmacm1t64 libibumad3 libpci3
  libudev1 libcap2 zlib1g libnl-3-200 libnl-route-3-200 libc6 libgcc-s1"
P25_APT_DIR=$CACHE/apt-trixie
P25_APT_OPTS=()
p25_apt_setup() {
  private_apt_setup "$P25_APT_DIR" trixie trixie-updates trixie-security || return 1
  touch "$P25_APT_DIR/status"
  # an empty dpkg status: apt resolves nothing against the machine's installed packages
  mapfile -t P25_APT_OPTS < <(private_apt_opts "$P25_APT_DIR" -o "Dir::State::status=$P25_APT_DIR/status")
}

# p25_versions: "PKG=VERSION" of trixie's candidates for P25_PKGS (fetches the lists once if
# they are empty); the stamp of the /opt/p25 overlay.
p25_versions() {
  p25_apt_setup || return 1
  if ! ls "$P25_APT_DIR"/lists/*_Packages >/dev/null 2>&1; then
    local out rc=0
    out=$(apt-get "${P25_APT_OPTS[@]}" update 2>&1) || rc=$?
    if [ $rc -ne 0 ] || grep -qE '^(E:|W: (Failed|Some index))' <<<"$out"; then
      printf '%s\n' "$out" | tail -5 >&2; err "packages: apt-get update (trixie) failed (rc=$rc)" >&2; return 1
    fi
  fi
  local p v
  for p in $P25_PKGS; do
    v=$(apt-cache "${P25_APT_OPTS[@]}" show --no-all-versions "$p" 2>/dev/null | awk '/^Version:/ { print $2; exit }')
    [ -n "$v" ] || { err "packages: trixie has no $p" >&2; return 1; }
    echo "$p=$v"
  done
}

# p25_download DIR: trixie's .debs of P25_PKGS into DIR.
p25_download() {
  p25_apt_setup || return 1
  # shellcheck disable=SC2086
  (cd "$1" && apt-get "${P25_APT_OPTS[@]}" download $P25_PKGS) >"$LOGDIR/apt-p25.log" 2>&1 \
    || { tail -3 "$LOGDIR/apt-p25.log"; err "packages: apt-get download (trixie) failed"; return 1; }
}
