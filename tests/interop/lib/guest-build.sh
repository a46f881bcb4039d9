# Guest kernel and initramfs, built once and cached under $CACHE:
#   $CACHE/kernel/   the linux-image .deb and vmlinux (uncompressed ELF: PVH boot); the
#                    package is unpacked only while an initramfs is built
#   $CACHE/guest/    initrd.cpio.gz (busybox, modules, rdma-core, rdmacm-utils, perftest,
#                    their libraries)
# Each directory has a .stamp naming its inputs; a changed input rebuilds it.

GUEST_BINS="ibv_devinfo ibv_devices ibv_rc_pingpong ib_write_bw ib_read_bw ib_send_bw
  ib_write_lat ib_read_lat ib_send_lat rdma ip
  rping ucmatose udaddy rdma_server rdma_client mckey"
RXE_PROVIDER=/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so
# Top-level modules per guest mode; dependencies are added by modinfo. crc32_generic is a
# crypto-API (not symbol) dependency of rdma_rxe, so it is named here. rdma_ucm is the
# kernel's connection manager for userspace (/dev/infiniband/rdma_cm, librdmacm's device): it
# brings rdma_cm, ib_cm, iw_cm and configfs.
MODS_RXE="virtio_pci virtio_net crc32_generic rdma_rxe rdma_ucm"
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
  for p in busybox-static ibverbs-utils ibverbs-providers libibverbs1 rdma-core perftest iproute2 \
    rdmacm-utils librdmacm1; do
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
  # glibc dlopens libgcc_s for pthread_exit / pthread_cancel (rping's threads end that way);
  # ldd does not name it
  p=$(ldconfig -p | awk '/libgcc_s\.so\.1 .*x86-64/ { print $NF; exit }')
  [ -n "$p" ] || { err "guest-build: libgcc_s.so.1 not found on the host"; return 1; }
  mkdir -p "$R$(dirname "$p")"; cp -L "$p" "$R$p"
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

# ---- /opt/p25: Debian trixie's perftest 25.01 and its userland, beside bookworm's ----
# A second root file system inside the rxe guest: trixie's libc6 (2.41), libibverbs1 and
# ibverbs-providers (rdma-core 56), librdmacm, perftest 25.01 (version string 6.24), unpacked
# from their .debs with dpkg -x. The guest's /init mounts /proc, /sys and /dev into it and the
# checks run its tools with `chroot /opt/p25`, so each binary finds its own dynamic loader, its
# own libraries and, through libibverbs' compiled-in paths (/etc/libibverbs.d and
# /usr/lib/x86_64-linux-gnu/libibverbs), trixie's rxe provider, never bookworm's.
# Result: $P25_ARCHIVE, a cpio archive appended to the rxe guest's initramfs.
P25_ARCHIVE=
build_p25() {
  local dir=$CACHE/guest-p25 key d R L f n missing
  key=$(p25_versions) || return 1
  key="$key
$(sha256sum "$HERE/lib/guest-build.sh" | cut -d' ' -f1)"
  P25_ARCHIVE=$dir/p25.cpio.gz
  if stamp_ok "$dir" "$key" && [ -f "$P25_ARCHIVE" ]; then info "trixie userland /opt/p25 (cached): $(grep '^perftest=' <<<"$key")"; return 0; fi
  rm -rf "$dir"; mkdir -p "$dir/debs"
  p25_download "$dir/debs" || return 1
  R=$dir/root/opt/p25; mkdir -p "$R"
  for f in "$dir"/debs/*.deb; do dpkg -x "$f" "$R" || { err "guest-build: dpkg -x $f failed"; return 1; }; done
  # merged /usr as trixie's base-files makes it, and the mount points /init fills
  for n in bin sbin lib lib64; do [ -e "$R/$n" ] || ln -s "usr/$n" "$R/$n"; done
  mkdir -p "$R"/{proc,sys,dev,tmp}
  rm -rf "$R/usr/share" "$R/usr/lib/x86_64-linux-gnu/gconv"
  # every shared object the ELF files ask for must be inside the overlay
  L=$R/usr/lib/x86_64-linux-gnu
  missing=$(find "$R/usr/bin" "$L" -type f \( -perm -u+x -o -name '*.so*' \) -print0 \
    | xargs -0 readelf -d 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u \
    | while read -r n; do [ -e "$L/$n" ] || printf '%s ' "$n"; done)
  [ -z "$missing" ] || { err "guest-build: trixie overlay lacks $missing(add their packages to P25_PKGS)"; return 1; }
  [ -e "$L/libibverbs/librxe-rdmav34.so" ] && [ -e "$R/etc/libibverbs.d/rxe.driver" ] \
    || { err "guest-build: trixie's ibverbs-providers has no rxe provider where expected"; return 1; }
  (cd "$dir/root" && find . -print0 | cpio --null -o -H newc --quiet | gzip -6) > "$P25_ARCHIVE.tmp" \
    && mv "$P25_ARCHIVE.tmp" "$P25_ARCHIVE" || return 1
  rm -rf "$dir/root" "$dir/debs"
  stamp_set "$dir" "$key"
  info "trixie userland /opt/p25: $(du -h "$P25_ARCHIVE" | cut -f1); $(grep -E '^(perftest|libibverbs1|libc6)=' <<<"$key" | tr '\n' ' ')"
}
