# Guest kernel and initramfs, built once and cached under $CACHE:
#   $CACHE/kernel/   the linux-image .deb and vmlinux (uncompressed ELF: PVH boot); the
#                    package is unpacked only while an initramfs is built
#   $CACHE/guest/    initrd.cpio.gz (busybox, modules, rdma-core, perftest, their libraries)
# Each directory has a .stamp naming its inputs; a changed input rebuilds it.

GUEST_BINS="ibv_devinfo ibv_devices ibv_rc_pingpong ib_write_bw ib_read_bw ib_send_bw
  ib_write_lat ib_read_lat ib_send_lat rdma ip"
RXE_PROVIDER=/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so
# Top-level modules per guest mode; dependencies are added by modinfo. crc32_generic is a
# crypto-API (not symbol) dependency of rdma_rxe, so it is named here.
MODS_RXE="virtio_pci virtio_net crc32_generic rdma_rxe"
MODS_VFIO="vfio_iommu_type1 vfio_pci"

KERNEL_DIR=; VMLINUX=; KVER=; INITRD=

build_kernel() {
  local kpkg; kpkg=$(kernel_package) || { err "packages: cannot tell which linux-image-6.1 package bookworm's linux-image-amd64 names"; return 1; }
  KERNEL_DIR=$CACHE/kernel
  KVER=${kpkg#linux-image-}
  VMLINUX=$KERNEL_DIR/vmlinux
  if stamp_ok "$KERNEL_DIR" "$kpkg"; then info "kernel $KVER (cached)"; return 0; fi
  rm -rf "$KERNEL_DIR"; mkdir -p "$KERNEL_DIR"
  apt_download "$kpkg" "$KERNEL_DIR" || return 1
  dpkg -x "$KERNEL_DIR"/"${kpkg}"_*.deb "$KERNEL_DIR/root" || return 1
  extract_vmlinux "$KERNEL_DIR/root/boot/vmlinuz-$KVER" "$VMLINUX" || return 1
  stamp_set "$KERNEL_DIR" "$kpkg"
  info "kernel $KVER: $(du -h "$VMLINUX" | cut -f1) vmlinux"
}

# extract_vmlinux BZIMAGE OUT: the uncompressed ELF inside a bzImage. It carries a PVH note, so
# `qemu -kernel vmlinux` skips the in-guest decompressor (about 7 s of a 12 s boot under TCG).
extract_vmlinux() {
  local in=$1 out=$2 magic off
  for magic in '\xfd7zXZ\x00:xz' '\x28\xb5\x2f\xfd:zstd' '\x1f\x8b\x08:gzip'; do
    for off in $(LC_ALL=C grep -abo -P "${magic%:*}" "$in" | cut -d: -f1); do
      # trailing data after the stream makes the decompressor complain: ignore, check the ELF magic
      tail -c +$((off + 1)) "$in" | "${magic#*:}" -dc 2>/dev/null > "$out" || true
      [ "$(head -c 4 "$out" | od -An -c | tr -d ' ')" = '177ELF' ] && return 0
    done
  done
  rm -f "$out"; err "guest-build: no ELF found inside $in"; return 1
}

# module_order DIR MOD...: relative paths (under DIR) of MODs and their dependencies, each after
# its dependencies.
module_order() {
  local dir=$1; shift
  declare -A path=() seen=()
  local f n
  while IFS= read -r f; do n=${f##*/}; n=${n%.ko}; path[${n//-/_}]=${f#"$dir"/}; done \
    < <(find "$dir/kernel" -name '*.ko')
  visit() {
    local m=${1//-/_} d
    [ -n "${seen[$m]:-}" ] && return 0
    seen[$m]=1
    [ -n "${path[$m]:-}" ] || { echo "guest-build: module $m not in the kernel package" >&2; return 1; }
    for d in $(modinfo -F depends "$dir/${path[$m]}" | tr ',' ' '); do visit "$d" || return 1; done
    echo "${path[$m]}"
  }
  for n in "$@"; do visit "$n" || return 1; done
}

# The stamp of the initramfs: everything that goes into it.
initrd_inputs() {
  local p
  echo "kernel=$KVER"
  for p in busybox-static ibverbs-utils ibverbs-providers libibverbs1 rdma-core perftest iproute2; do
    echo "$p=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null)"
  done
  sha256sum "$HERE/guest/init" "$HERE/lib/guest-build.sh" | cut -d' ' -f1
}

build_initrd() {
  local dir=$CACHE/guest key
  INITRD=$dir/initrd.cpio.gz
  key=$(initrd_inputs)
  if stamp_ok "$dir" "$key" && [ -f "$INITRD" ]; then info "initramfs (cached)"; return 0; fi
  rm -rf "$dir"; mkdir -p "$dir"
  local R=$dir/root mdir=$KERNEL_DIR/root/lib/modules/$KVER b p m
  # the unpacked kernel package is only kept while an initramfs is being built (~450 MB)
  [ -d "$mdir" ] || dpkg -x "$KERNEL_DIR"/"linux-image-${KVER}"_*.deb "$KERNEL_DIR/root" || return 1
  mkdir -p "$R"/{bin,sbin,usr/bin,usr/sbin,lib,lib64,etc,proc,sys,dev,tmp,run,root,opt/bin}
  cp /bin/busybox "$R/bin/busybox"
  install -m 0755 "$HERE/guest/init" "$R/init"

  # modules (Debian's 6.1 ships plain .ko), one load-order list per guest mode
  for m in rxe vfio; do
    local mods; [ $m = rxe ] && mods=$MODS_RXE || mods=$MODS_VFIO
    module_order "$mdir" $mods > "$R/etc/modules.$m" || return 1
    for p in $(cat "$R/etc/modules.$m"); do
      mkdir -p "$R/lib/modules/$KVER/$(dirname "$p")"; cp "$mdir/$p" "$R/lib/modules/$KVER/$p"
    done
  done

  # userspace: the tools, the rxe provider, and every library ldd names
  local objs=()
  for b in $GUEST_BINS; do
    p=$(PATH=/usr/sbin:/usr/bin:/sbin:/bin command -v "$b") || { err "guest-build: $b not found on the host"; return 1; }
    # ip and rdma go to /usr/sbin, where the guest calls them (busybox has its own `ip` applet)
    case $b in ip|rdma) cp -L "$p" "$R/usr/sbin/$b" ;; *) mkdir -p "$R$(dirname "$p")"; cp -L "$p" "$R$p" ;; esac
    objs+=("$p")
  done
  mkdir -p "$R/etc/libibverbs.d" "$R$(dirname $RXE_PROVIDER)"
  cp /etc/libibverbs.d/rxe.driver "$R/etc/libibverbs.d/"
  cp -L "$RXE_PROVIDER" "$R$RXE_PROVIDER"; objs+=("$RXE_PROVIDER")
  for b in "${objs[@]}"; do
    ldd "$b" | awk '/=> \// { print $3 } /^[[:space:]]*\/lib64\// { print $1 }'
  done | sort -u | while read -r p; do
    mkdir -p "$R$(dirname "$p")"; cp -L "$p" "$R$p"
  done
  cp -L /lib64/ld-linux-x86-64.so.2 "$R/lib64/"
  echo 'root:x:0:0:root:/root:/bin/sh' > "$R/etc/passwd"
  echo 'root:x:0:' > "$R/etc/group"
  touch "$R/etc/hosts"
  (cd "$R" && find . -print0 | cpio --null -o -H newc --quiet | gzip -6) > "$INITRD" || return 1
  cp "$R/etc/modules.rxe" "$R/etc/modules.vfio" "$dir/"
  rm -rf "$R" "$KERNEL_DIR/root"
  stamp_set "$dir" "$key"
  info "initramfs: $(du -h "$INITRD" | cut -f1); modules rxe: $(xargs -n1 basename < "$dir/modules.rxe" | tr '\n' ' ')"
  info "modules vfio: $(xargs -n1 basename < "$dir/modules.vfio" | tr '\n' ' ')"
}

# overlay_initrd BASE OUT FILE...: BASE plus a second cpio archive with FILEs in /opt/bin (the
# kernel unpacks concatenated archives in order), so a rebuilt test binary does not rebuild BASE.
overlay_initrd() {
  local base=$1 out=$2 d f; shift 2
  d=$(mktemp -d); mkdir -p "$d/opt/bin"
  for f in "$@"; do install -m 0755 "$f" "$d/opt/bin/"; done
  { cat "$base"; (cd "$d" && find . -print0 | cpio --null -o -H newc --quiet | gzip -1); } > "$out.tmp" \
    && mv "$out.tmp" "$out"
  local rc=$?; rm -rf "$d"; return $rc
}
