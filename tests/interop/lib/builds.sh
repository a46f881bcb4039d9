# Rust builds the harness needs: the static vfio-edu test program (its own Cargo package and
# target folder under $CACHE) and, for the rnic checks, the rnic tool of the workspace.

VFIO_INITRD=; RNIC_BIN=; RXE_INITRD=

# build_vfio_edu: static vfio-edu, then $CACHE/guest/initrd-vfio.cpio.gz = base initramfs +
# /opt/bin/vfio-edu. A failure leaves its reason as the last line of vfio-edu-build.summary.
build_vfio_edu() {
  local target=$CACHE/vfio-edu-target triple=x86_64-unknown-linux-gnu bin
  local sum=$LOGDIR/vfio-edu-build.summary
  bin=$target/$triple/release/vfio-edu
  # the workspace's lock file as the starting point, so the driver is built with the versions
  # the workspace tests (cargo drops what vfio-edu does not use; the copy is git-ignored)
  cp "$REPO/Cargo.lock" "$HERE/vfio-edu/Cargo.lock"
  if ! (cd "$HERE/vfio-edu" && RUSTFLAGS='-C target-feature=+crt-static' CARGO_TARGET_DIR=$target \
        nice cargo build --release --target $triple) >"$LOGDIR/vfio-edu-build.log" 2>&1; then
    grep -E '^error' -A6 "$LOGDIR/vfio-edu-build.log" | head -40 | sed 's/^/     | /'
    echo "cargo build of tests/interop/vfio-edu failed: $(grep -m1 -E '^error' "$LOGDIR/vfio-edu-build.log")" | tee "$sum"
    return 1
  fi
  # the guest has no libc: the binary must not ask for a program interpreter
  if readelf -l "$bin" | grep -q 'program interpreter'; then
    echo "vfio-edu is not statically linked (RUSTFLAGS +crt-static ignored?)" | tee "$sum"; return 1
  fi
  VFIO_INITRD=$CACHE/guest/initrd-vfio.cpio.gz
  overlay_initrd "$INITRD" "$VFIO_INITRD" "$bin" || { echo "initramfs overlay failed" | tee "$sum"; return 1; }
  info "vfio-edu $(du -h "$bin" | cut -f1), initramfs with it $(du -h "$VFIO_INITRD" | cut -f1)"
}

build_rnic() {
  RNIC_BIN=$REPO/target/release/rnic
  (cd "$REPO" && nice cargo build --release --locked -p rnic-tools) >"$LOGDIR/rnic-build.log" 2>&1 \
    || { grep -E '^error' -A6 "$LOGDIR/rnic-build.log" | head -30 | sed 's/^/     | /'
         err "cargo build --release -p rnic-tools failed: $(grep -m1 -E '^error' "$LOGDIR/rnic-build.log")"; return 1; }
  [ -x "$RNIC_BIN" ] || { err "no $RNIC_BIN after the build"; return 1; }
}

# rnic_initrd: $CACHE/guest/initrd-rxe-rnic.cpio.gz = base initramfs + /opt/bin/rnic and the
# libraries it needs beyond the base's (libgcc_s), so the rxe guest can run rnic's loopback
# beside rxe's (the same-guest comparison check), + trixie's /opt/p25 when build_p25 made it.
# Run after build_rnic.
rnic_initrd() {
  local d lib out=$CACHE/guest/initrd-rxe-rnic.cpio.gz
  d=$(mktemp -d); mkdir -p "$d/opt/bin"
  strip -o "$d/opt/bin/rnic" "$RNIC_BIN" || { rm -rf "$d"; return 1; }
  for lib in $(ldd "$RNIC_BIN" | awk '/=> \// { print $3 }'); do
    mkdir -p "$d$(dirname "$lib")"; cp -L "$lib" "$d$lib"
  done
  { cat "$INITRD" ${P25_ARCHIVE:+"$P25_ARCHIVE"}; (cd "$d" && find . -print0 | cpio --null -o -H newc --quiet | gzip -1); } > "$out.tmp" \
    && mv "$out.tmp" "$out" || { rm -rf "$d"; return 1; }
  rm -rf "$d"; RXE_INITRD=$out
  info "rxe guest initramfs with rnic: $(du -h "$out" | cut -f1)"
}
