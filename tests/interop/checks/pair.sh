# One rdma-core / perftest run between rnic (host side, in the namespace, on the emulated device
# emu:10.11.0.1 over its UDP link) and the same tool on rxe in the guest (10.11.0.2).
# usage: pair.sh [--p25] ROLE TOOL [ARGS...]
#   --p25 the guest's tool is Debian trixie's (perftest 25.01, `chroot /opt/p25`, its own libc,
#         libibverbs and rxe provider); rnic logs (RUST_LOG) whether it negotiated parameters
#   ROLE  rnic-server (rnic listens, the guest's tool connects) | rnic-client (the reverse)
#   TOOL  rc_pingpong | write_bw | read_bw | send_bw | write_lat | send_lat
#   ARGS  passed to both sides (e.g. -s 4096)
# Both sides must exit 0; rc_pingpong runs with -c, so both sides verify the data they receive.
# Each side's result line (usec/iter; the perftest table row) is kept. RoCE v2 frames on br0 are
# captured to $LOGDIR/checks/NAME.pcap; every frame's ICRC is recomputed (lib/roce-pcap.py) and
# one wrong ICRC fails the check; per direction the frame count and opcodes are kept.
# Developer mode RNIC_INTEROP_PEER=guest: the rnic side is a second rxe guest "peer" (10.11.0.3)
# running the rdma-core tool, to exercise this script without rnic (the harness never counts
# such a run as passed).
P25=; [ "${1:-}" = --p25 ] && { P25=1; shift; }
role=$1 tool=$2; shift 2
extra="$*"
GUEST_IP=10.11.0.2
case $tool in
  rc_pingpong) gtool=ibv_rc_pingpong rsub=rc-pingpong common="-g 1 -n 1000 -c" ;;
  # perftest: GID index 1 (-x), no CPU-frequency warning (-F), 1000 iterations (TCG is slow)
  write_bw|read_bw|send_bw|write_lat|send_lat) gtool=ib_$tool rsub=${tool/_/-} common="-x 1 -F -n 1000" ;;
  *) fail "unknown tool $tool" ;;
esac
name=${CHECK:-$role-$tool}
PCAP=$LOGDIR/checks/$name.pcap
TO=150          # seconds either side may take
GCMD="$gtool -d rxe0 $common $extra"
[ -n "$P25" ] && GCMD="chroot /opt/p25 $GCMD"

if [ "${RNIC_INTEROP_PEER:-rnic}" = guest ]; then
  PEER_IP=10.11.0.3
  PCMD="$gtool -d rxe0 $common $extra"
else
  PEER_IP=$NET_HOST
  # RNIC_DEV: another rnic device (tap-pair.sh: an emu-tap device on br0)
  PCMD="$RNIC_BIN $rsub -d ${RNIC_DEV:-emu:$NET_HOST} $common $extra"
  # its log says whether the peer's version made it negotiate (perftest >= 6.28) or not
  [ -n "$P25" ] && PCMD="env RUST_LOG=rnic_tools::perf=info $PCMD"
  [ -x "$RNIC_BIN" ] || fail "no rnic binary at $RNIC_BIN"
fi
ensure_rxe0
[ "${RNIC_INTEROP_PEER:-rnic}" = guest ] && { gx peer --timeout 30 '[ -e /sys/class/infiniband/rxe0 ] || /usr/sbin/rdma link add rxe0 type rxe netdev eth0' || fail "rxe0 in the peer guest"; }

# ---- the two sides: a guest (over its console) or the host (in the namespace) ----
# side_start SIDE CMD: start CMD in the background; side_finish SIDE: wait, print output, return rc
side_start() {
  case $1 in
    host) in_ns timeout $TO $2 > "$LOGDIR/checks/$name.host.log" 2>&1 & echo $! > "$RUNDIR/$name.hostpid" ;;
    *) gx "$1" --timeout 10 "rm -f /tmp/side.log; (timeout $TO $2) >/tmp/side.log 2>&1 </dev/null & SIDE=\$!" ;;
  esac
}
side_finish() {  # side_finish SIDE OUTFILE: wait for the background side; its output to OUTFILE
  local rc out
  case $1 in
    host) wait "$(cat "$RUNDIR/$name.hostpid")"; rc=$?; cp "$LOGDIR/checks/$name.host.log" "$2" ;;
    *) out=$(gx "$1" --timeout $((TO + 10)) 'wait $SIDE; echo "side-rc=$?"; cat /tmp/side.log')
       echo "$out" | grep -v '^side-rc=' > "$2"
       rc=$(echo "$out" | sed -n 's/^side-rc=//p' | head -1); rc=${rc:-125} ;;
  esac
  return "$rc"
}
side_run() {  # side_run SIDE CMD: foreground
  case $1 in
    host) in_ns timeout $TO $2 2>&1 ;;
    *) gx "$1" --timeout $((TO + 10)) "timeout $TO $2" ;;
  esac
}
# side_listening SIDE: the server side accepts on TCP 18515 (its out-of-band exchange port)
side_listening() {
  case $1 in
    host) in_ns ss -Hltn 'sport = :18515' | grep -q . ;;
    *) gx "$1" --timeout 10 'netstat -ltn | grep -q ":18515 "' >/dev/null ;;
  esac
}
# the guest's side is always "rxe"; the peer is the host, or guest "peer" in developer mode
PEER=host; [ "${RNIC_INTEROP_PEER:-rnic}" = guest ] && PEER=peer

# rxe's own counters in the guest, before and after: their deltas tell what rxe saw (dropped
# packets with a bad ICRC only show up as completer_retry_err / retries, for example)
counters() { gx rxe --timeout 10 'cd /sys/class/infiniband/rxe0/ports/1/hw_counters && for f in *; do echo "$f $(cat $f)"; done'; }
C0=$(counters)

# ---- capture ----
# (ip netns exec, not the in_ns function: $! must be tcpdump itself, not a subshell around it)
ip netns exec "$NS" tcpdump -i br0 -n -U -s 0 -w "$PCAP" udp port 4791 2>/dev/null & TD=$!
sleep 0.5

if [ "$role" = rnic-server ]; then SRV=$PEER SRVCMD=$PCMD CLI=rxe CLICMD="$GCMD $PEER_IP"
else SRV=rxe SRVCMD=$GCMD CLI=$PEER CLICMD="$PCMD $GUEST_IP"; fi
echo "### server ($SRV): $SRVCMD"
echo "### client ($CLI): $CLICMD"
side_start "$SRV" "$SRVCMD"
for i in $(seq 100); do side_listening "$SRV" && break; sleep 0.2; done
side_listening "$SRV" || echo "(server not seen listening on 18515 after 20 s; trying anyway)"
echo "--- client output"
cout=$(side_run "$CLI" "$CLICMD"); crc=$?
echo "$cout"
echo "--- client exit status $crc"
echo "--- server output"
side_finish "$SRV" "$LOGDIR/checks/$name.server.out"; src=$?
sout=$(cat "$LOGDIR/checks/$name.server.out"); echo "$sout"
echo "--- server exit status $src"
# TERM, not INT: a background job of a non-interactive shell ignores SIGINT
sleep 0.5; kill -TERM $TD 2>/dev/null; wait $TD 2>/dev/null
frames=$(tcpdump -r "$PCAP" -n 2>/dev/null | wc -l)
# every frame's ICRC, recomputed (rxe silently drops a frame with a bad one)
icrc=$("$HERE/lib/roce-pcap.py" "$PCAP"); icrc_rc=$?
echo "--- capture: $frames frames"; echo "$icrc"
C1=$(counters)
deltas=$(awk 'NR == FNR { a[$1] = $2; next } $2 != a[$1] { printf "%s +%d ", $1, $2 - a[$1] }' <(echo "$C0") <(echo "$C1"))
[ -n "$deltas" ] || deltas="no change "
echo "--- rxe counter changes: $deltas"

# ---- verdict and result lines ----
resline() {  # resline OUTPUT: the tool's result line, perftest's table row with its column names
  case $tool in
    rc_pingpong) echo "$1" | grep -E 'usec/iter' ;;
    *_bw) echo "$1" | awk '/#bytes/ { u = $0; sub(/.*BW average\[/, "", u); sub(/\].*/, "", u); h = 1; next }
            h && /^ *[0-9]+ +[0-9]+ / { printf "%s B x %s: BW peak %s, BW average %s %s, MsgRate %s Mpps\n", $1, $2, $3, $4, u, $5; exit }' ;;
    *_lat) echo "$1" | awk '/#bytes/ { h = 1; next }
            h && /^ *[0-9]+ +[0-9]+ / { printf "%s B x %s: t_min %s, t_typical %s, t_avg %s, t_max %s usec, 99%% %s, 99.9%% %s\n", $1, $2, $3, $5, $6, $4, $8, $9; exit }' ;;
  esac | sed -E 's/^ +//; s/[[:space:]]+/ /g'
}
cres=$(resline "$cout"); sres=$(resline "$sout")
[ -n "$cres" ] && result "client ($CLI): $cres"
[ -n "$sres" ] && result "server ($SRV): $sres"
while IFS= read -r l; do result "br0 $l"; done <<<"$icrc"
result "rxe counters: ${deltas% }"
if [ -n "$P25" ] && [ "$PEER" = host ]; then
  neg=$(printf '%s\n%s\n' "$cout" "$sout" | grep -o 'perftest parameter negotiation.*' | head -1)
  result "rnic: ${neg:-no negotiation log line}"
fi
[ $crc -eq 0 ] || fail "client ($CLI) exit status $crc: $(echo "$cout" | grep -v '^ *$' | tail -1)"
[ $src -eq 0 ] || fail "server ($SRV) exit status $src: $(echo "$sout" | grep -v '^ *$' | tail -1)"
[ -n "$cres$sres" ] || fail "no result line from either side"
[ "$frames" -gt 0 ] || fail "no RoCE v2 frame seen on br0"
[ $icrc_rc -eq 0 ] || fail "frames with a wrong ICRC on br0 ($PCAP)"
# a passing check's capture is only kept when small (the bandwidth runs make ~70 MB)
[ "$(stat -c %s "$PCAP")" -lt 20000000 ] || { rm -f "$PCAP"; echo "(capture removed: large, check passed)"; }
