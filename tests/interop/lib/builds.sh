# Rust builds the harness needs: the static vfio-edu test program (its own Cargo package and
# target folder under $CACHE) and, for the rnic checks, the rnic tool of the workspace.

VFIO_INITRD=; RNIC_BIN=

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
