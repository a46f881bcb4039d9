# Starting and stopping QEMU guests (TCG: KVM here cannot run a stock kernel). Each guest has
# $RUNDIR/NAME.{pid,sock,console.log,qemu.log}; only guests with a pidfile there are stopped.

# guest_start NAME KIND: KIND rxe (virtio-net on tap0, 10.11.0.2), peer (tap1, 10.11.0.3) or
# vfio (q35 + intel-iommu + edu, no network). Returns once QEMU has daemonized; use guest_wait_ready next.
guest_start() {
  local name=$1 kind=$2 args append initrd=$INITRD
  rm -f "$RUNDIR/$name".{pid,sock,console.log,qemu.log}
  case $kind in
    rxe|peer)  # peer: a second rxe guest (developer mode RNIC_INTEROP_PEER=guest)
      local n=0; [ $kind = peer ] && n=1
      args=(-m 1024 -smp 1
            -netdev tap,id=n0,ifname=tap$n,script=no,downscript=no
            -device virtio-net-pci,netdev=n0,mac=52:54:00:11:00:0$((n + 2)))
      append="gmode=rxe gip=10.11.0.$((n + 2))/24 gname=$name"
      # with the rnic checks on, the rxe guest also carries /opt/bin/rnic (rnic_initrd)
      [ $kind = rxe ] && [ -n "${RXE_INITRD:-}" ] && initrd=$RXE_INITRD ;;
    vfio)
      # intel-iommu must come before edu; interrupt remapping is needed by vfio_iommu_type1
      args=(-machine q35,kernel-irqchip=split -m 1024 -smp 1
            -device intel-iommu,intremap=on,caching-mode=on -device edu -nic none)
      append="intel_iommu=on gmode=vfio gname=$name"
      initrd=$VFIO_INITRD ;;
    *) err "guest_start: unknown kind $kind"; return 1 ;;
  esac
  in_ns qemu-system-x86_64 -accel tcg "${args[@]}" \
    -kernel "$VMLINUX" -initrd "$initrd" -append "console=ttyS0 quiet $append" \
    -display none -monitor none -no-reboot \
    -chardev "socket,id=con,path=$RUNDIR/$name.sock,server=on,wait=off,logfile=$RUNDIR/$name.console.log" \
    -serial chardev:con -d guest_errors -D "$RUNDIR/$name.qemu.log" \
    -pidfile "$RUNDIR/$name.pid" -daemonize 2>"$RUNDIR/$name.start.log" \
    || { err "guest $name: qemu failed to start: $(head -3 "$RUNDIR/$name.start.log")"; return 1; }
  on_exit guest_stop "$name"
  info "guest $name ($kind) started, pid $(cat "$RUNDIR/$name.pid")"
}

# guest_wait_ready NAME [TIMEOUT]: wait for "INIT: READY" and the command loop.
guest_wait_ready() {
  local name=$1 to=${2:-120} t0; t0=$(now)
  local pid; pid=$(cat "$RUNDIR/$name.pid")
  while ! grep -q 'INIT: READY' "$RUNDIR/$name.console.log" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || { err "guest $name: qemu exited during boot"; tail -20 "$RUNDIR/$name.console.log"; return 1; }
    if [ "$(elapsed "$t0" | cut -d. -f1)" -ge "$to" ]; then
      err "guest $name: not ready after $to s"; tail -20 "$RUNDIR/$name.console.log"; return 1
    fi
    sleep 0.2
  done
  "$HERE/lib/guest.py" "$RUNDIR/$name.sock" ready --timeout 30 || return 1
  grep 'INIT: ERROR' "$RUNDIR/$name.console.log" && { err "guest $name: init reported errors"; return 1; }
  info "guest $name ready after $(elapsed "$t0") s ($(grep -o 'INIT: uptime [0-9.]*s' "$RUNDIR/$name.console.log" | cut -d' ' -f3) guest uptime)"
}

guest_stop() {
  local name=$1 pidf=$RUNDIR/$1.pid pid i
  [ -f "$pidf" ] || return 0
  pid=$(cat "$pidf")
  # only a QEMU that we started (its command line names our run directory)
  if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q "qemu-system.*$RUNDIR/$name.sock"; then
    kill "$pid"
    for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    info "guest $name stopped (pid $pid)"
  fi
  rm -f "$pidf"
  cp "$RUNDIR/$name.console.log" "$LOGDIR/" 2>/dev/null || true
}

# gx NAME [--timeout S] CMD...: run commands in guest NAME; output to stdout, transcript kept.
gx() {
  local name=$1; shift
  "$HERE/lib/guest.py" "$RUNDIR/$name.sock" run --log "$LOGDIR/$name.transcript" "$@"
}
