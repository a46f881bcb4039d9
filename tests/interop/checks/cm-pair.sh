# One librdmacm tool run between rnic (host side, in the namespace, on the emulated device
# emu:10.11.0.1 over its UDP link) and rdmacm-utils / perftest on rxe in the guest (10.11.0.2):
# both sides connect with the connection manager (rdma_cm on the kernel's ib_cm in the guest,
# rnic-cm on rnic's QP1), not over a TCP side channel.
# usage: cm-pair.sh ROLE TOOL
#   ROLE  rnic-server (rnic listens, the guest's tool connects) | rnic-client (the reverse)
#   TOOL  rping     rping -s -a SRV -C 1000 -V / rping -c -a SRV -C 1000 -V -v (RC: SEND,
#                   RDMA READ and WRITE each ping; the client prints and both validate)
#         ucmatose  ucmatose [-b SRV] / ucmatose -s SRV, -c 2 -C 100 (two RC connections,
#                   100 SENDs each way on each) (rnic: `rnic cmatose`)
#         udaddy    udaddy [-b SRV] / udaddy -s SRV, -c 2 -C 100 (UD over SIDR: two UD QPs
#                   resolved through SIDR REQ / REP, 100 datagrams each way on each)
#         write_bw  ib_write_bw -R / rnic write-bw -R -u 18, -F -n 1000 (perftest over rdma_cm)
#         send_lat  ib_send_lat -R / rnic send-lat -R -u 18, -F -n 1000
# Both sides must exit 0 and report the tool's success (rping: 1000 "ping data" lines from the
# client; ucmatose / udaddy: "return status 0"; perftest: its result row). RoCE v2 frames on
# br0 are captured to $LOGDIR/checks/NAME.pcap: every frame's ICRC is recomputed
# (lib/roce-pcap.py), every MAD to QP 1 must decode in tshark's InfiniBand CM dissector
# (lib/check.sh cm_mads), and the handshake must be on the wire in the right directions (RC:
# ConnectRequest and ReadyToUse from the client, ConnectReply from the server, and a
# DisconnectRequest / DisconnectReply pair for rping and ucmatose; UD: ServiceIDResReq from the
# client, ServiceIDResReqResp from the server). The guest's ib_cm and rxe counter changes are
# kept (cm_tx_retries shows a MAD the kernel had to resend), and how many DREQs no DREP
# answered (kept, not a failure: rnic's CM lives in its process, and a DREQ that arrives after
# the process exited is answered by no one, where a kernel's CM would answer it).
# Both sides run in the background and are watched, so that a side that failed does not leave
# the other waiting until its timeout.
# Developer mode RNIC_INTEROP_PEER=guest: the rnic side is a second rxe guest "peer"
# (10.11.0.3) running the same rdmacm-utils / perftest tool, to exercise this script without
# rnic (the harness never counts such a run as passed).
role=$1 tool=$2; shift 2
GUEST_IP=10.11.0.2
name=${CHECK:-cm-$role-$tool}
PCAP=$LOGDIR/checks/$name.pcap
TO=100          # seconds either side may take

PEER=host
if [ "${RNIC_INTEROP_PEER:-rnic}" = guest ]; then PEER=peer PEER_IP=10.11.0.3
else PEER_IP=$NET_HOST; [ -x "$RNIC_BIN" ] || fail "no rnic binary at $RNIC_BIN"; fi

# cmd KIND SIDE MY_IP OTHER_IP: the command line of one side. KIND tool (the guest's
# rdmacm-utils / perftest) or rnic; SIDE server or client.
cmd() {
  local k=$1 s=$2 me=$3 other=$4 r=$RNIC_BIN
  case $tool/$k/$s in
    rping/tool/server)    echo "rping -s -a $me -C 1000 -V" ;;
    rping/tool/client)    echo "rping -c -a $other -C 1000 -V -v" ;;
    rping/rnic/server)    echo "$r rping -s -a $me -C 1000 -V" ;;
    rping/rnic/client)    echo "$r rping -c -I $me -a $other -C 1000 -V -v" ;;
    ucmatose/tool/server) echo "ucmatose -b $me -c 2 -C 100" ;;
    ucmatose/tool/client) echo "ucmatose -s $other -c 2 -C 100" ;;
    ucmatose/rnic/server) echo "$r cmatose -b $me -c 2 -C 100" ;;
    ucmatose/rnic/client) echo "$r cmatose -s $other -b $me -c 2 -C 100" ;;
    udaddy/tool/server)   echo "udaddy -b $me -c 2 -C 100" ;;
    udaddy/tool/client)   echo "udaddy -s $other -c 2 -C 100" ;;
    udaddy/rnic/server)   echo "$r udaddy -b $me -c 2 -C 100" ;;
    udaddy/rnic/client)   echo "$r udaddy -s $other -b $me -c 2 -C 100" ;;
    *_bw/tool/server|*_lat/tool/server) echo "ib_$tool -R -d rxe0 -F -n 1000" ;;
    *_bw/tool/client|*_lat/tool/client) echo "ib_$tool -R -d rxe0 -F -n 1000 $other" ;;
    # rnic's QPs wait 2^18 x 4.096 us (1.07 s) for an ACK (-u 18): the TCG guest goes
    # silent for up to 0.5 s under load, longer than perftest's default -u 14 (67 ms) x 8
    # tries; the guest's perftest 4.5 keeps the CM's 19 (2.1 s) on its rdma_cm QPs.
    *_bw/rnic/server|*_lat/rnic/server) echo "$r ${tool/_/-} -R -u 18 -d emu:$me -F -n 1000" ;;
    *_bw/rnic/client|*_lat/rnic/client) echo "$r ${tool/_/-} -R -u 18 -d emu:$me -F -n 1000 $other" ;;
    *) fail "unknown tool $tool" ;;
  esac
}
case $tool in
  rping) PORT=7174 PS=TCP ;; ucmatose) PORT=7471 PS=TCP ;; udaddy) PORT=7174 PS=UDP ;;
  write_bw|send_lat) PORT=18515 PS=TCP ;;
  *) fail "unknown tool $tool" ;;
esac
[ $PEER = host ] && pk=rnic || pk=tool
if [ "$role" = rnic-server ]; then
  SRV=$PEER SRV_IP=$PEER_IP SRVCMD=$(cmd $pk server $PEER_IP $GUEST_IP)
  CLI=rxe CLI_IP=$GUEST_IP CLICMD=$(cmd tool client $GUEST_IP $PEER_IP)
else
  SRV=rxe SRV_IP=$GUEST_IP SRVCMD=$(cmd tool server $GUEST_IP $PEER_IP)
  CLI=$PEER CLI_IP=$PEER_IP CLICMD=$(cmd $pk client $PEER_IP $GUEST_IP)
fi
ensure_rxe0
[ $PEER = peer ] && { gx peer --timeout 30 '[ -e /sys/class/infiniband/rxe0 ] || /usr/sbin/rdma link add rxe0 type rxe netdev eth0' || fail "rxe0 in the peer guest"; }

# ---- the two sides: a guest (over its console) or the host (in the namespace) ----
side_start() {  # side_start SIDE CMD: CMD in the background
  case $1 in
    # (ip netns exec, not the in_ns function: $! must be timeout itself, which side_stop
    # signals and which passes the signal on, not a subshell around it)
    host) ip netns exec "$NS" timeout $TO $2 > "$LOGDIR/checks/$name.host.log" 2>&1 &
          echo $! > "$RUNDIR/$name.hostpid" ;;
    # stdout and stderr apart: a C tool's stdout to a file is block-buffered, and a line on
    # stderr (rping's "client DISCONNECT EVENT...") would land inside a line of its stdout
    *) gx "$1" --timeout 10 "rm -f /tmp/side.log /tmp/side.err; (timeout $TO $2) >/tmp/side.log 2>/tmp/side.err </dev/null & SIDE=\$!" ;;
  esac
}
side_finish() {  # side_finish SIDE OUTFILE: wait for the background side; its output to OUTFILE
  local rc out
  case $1 in
    host) wait "$(cat "$RUNDIR/$name.hostpid")"; rc=$?; cp "$LOGDIR/checks/$name.host.log" "$2" ;;
    *) out=$(gx "$1" --timeout $((TO + 10)) 'wait $SIDE; echo "side-rc=$?"; cat /tmp/side.log /tmp/side.err')
       echo "$out" | grep -v '^side-rc=' > "$2"
       rc=$(echo "$out" | sed -n 's/^side-rc=//p' | head -1); rc=${rc:-125} ;;
  esac
  return "$rc"
}
side_stop() {  # side_stop SIDE: end the background side now (its output is kept)
  case $1 in
    host) kill -TERM "$(cat "$RUNDIR/$name.hostpid")" 2>/dev/null ;;
    *) gx "$1" --timeout 10 'kill $SIDE 2>/dev/null; true' >/dev/null ;;
  esac
}
side_alive() {  # side_alive SIDE: the background side still runs (a guest's zombie does not)
  case $1 in
    host) kill -0 "$(cat "$RUNDIR/$name.hostpid")" 2>/dev/null ;;
    *) gx "$1" --timeout 10 's=$(cut -d" " -f3 /proc/$SIDE/stat 2>/dev/null); [ -n "$s" ] && [ "$s" != Z ]' >/dev/null ;;
  esac
}
# side_listening SIDE: the server's rdma_cm id listens on the tool's port. A kernel shows it
# (`rdma resource show cm_id`); rnic has no kernel object to look at, so there it is rnic's
# RoCE socket (UDP 4791 in the namespace) bound, and a second for the id to listen behind it.
side_listening() {
  case $1 in
    host) in_ns ss -Hlun 'sport = :4791' | grep -q . && sleep 1 ;;
    *) gx "$1" --timeout 10 "/usr/sbin/rdma resource show cm_id | grep -qE 'state LISTEN ps $PS .*src-addr [0-9.]+:$PORT '" >/dev/null ;;
  esac
}

counters() { gx rxe --timeout 10 'cd /sys/class/infiniband/rxe0/ports/1/hw_counters && for f in *; do echo "$f $(cat $f)"; done'; }
C0=$(counters); M0=$(cm_counters rxe) || fail "no ib_cm counters for rxe0 in the guest (is ib_cm loaded?)"

# ---- capture ----
# --immediate-mode: without it the kernel hands tcpdump its frames in blocks retired after up to
# a second, and the last ones (the DREQ / DREP at the end) are lost when tcpdump is stopped.
# Immediate mode uses a ring of fixed slots of the snap length: 2048 B (the guest's MTU is 1500)
# and a 16 MiB buffer, so a burst does not overflow it; tcpdump's drop count is kept.
ip netns exec "$NS" tcpdump -i br0 -n -U --immediate-mode -s 2048 -B 16384 -w "$PCAP" udp port 4791 \
  2>"$LOGDIR/checks/$name.tcpdump.log" & TD=$!
sleep 0.5

echo "### server ($SRV): $SRVCMD"
echo "### client ($CLI): $CLICMD"
side_start "$SRV" "$SRVCMD"
for i in $(seq 100); do side_listening "$SRV" && break; sleep 0.2; done
side_listening "$SRV" || echo "(server not seen listening on $PS port $PORT after 20 s; trying anyway)"
# Both sides run in the background, watched: the run ends when the client does; a server that
# failed leaves its client waiting until its own timeout, so 10 s after a server's failure the
# client is stopped; a client that failed leaves its server waiting the same way, so it is
# stopped at once. A failing check takes seconds, not minutes.
side_start "$CLI" "$CLICMD"
t0=$(date +%s.%N) srv_end= src= cli_stopped=
while side_alive "$CLI"; do
  if [ -z "$srv_end" ] && ! side_alive "$SRV"; then
    srv_end=$(date +%s)
    side_finish "$SRV" "$LOGDIR/checks/$name.server.out"; src=$?
  fi
  if [ -n "$srv_end" ] && [ "$src" -ne 0 ] && [ $(($(date +%s) - srv_end)) -ge 10 ]; then
    echo "(the server failed and the client still ran 10 s later: stopping the client)"
    side_stop "$CLI"; cli_stopped=1; break
  fi
  sleep 0.5
done
ct=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
side_finish "$CLI" "$LOGDIR/checks/$name.client.out"; crc=$?
cout=$(cat "$LOGDIR/checks/$name.client.out")
echo "--- client output"; echo "$cout"
echo "--- client exit status $crc (about $ct s)"
if [ -z "$srv_end" ]; then
  [ $crc -eq 0 ] || side_stop "$SRV"
  side_finish "$SRV" "$LOGDIR/checks/$name.server.out"; src=$?
fi
sout=$(cat "$LOGDIR/checks/$name.server.out")
echo "--- server output"; echo "$sout"
echo "--- server exit status $src"
sleep 0.5; kill -TERM $TD 2>/dev/null; wait $TD 2>/dev/null
frames=$(tcpdump -r "$PCAP" -n 2>/dev/null | wc -l)
dropped=$(sed -n 's/^\([0-9]*\) packets dropped by kernel/\1/p' "$LOGDIR/checks/$name.tcpdump.log")
icrc=$("$HERE/lib/roce-pcap.py" "$PCAP"); icrc_rc=$?
echo "--- capture: $frames frames, ${dropped:-?} dropped by the kernel"; echo "$icrc"
mads=$(cm_mads "$PCAP"); mads_rc=$?
dreqs=$(cm_unanswered_dreqs "$PCAP")
echo "--- CM MADs (tshark)"; echo "$mads"; echo "$dreqs"
C1=$(counters); M1=$(cm_counters rxe)
deltas=$(awk 'NR == FNR { a[$1] = $2; next } $2 != a[$1] { printf "%s +%d ", $1, $2 - a[$1] }' <(echo "$C0") <(echo "$C1"))
[ -n "$deltas" ] || deltas="no change "
cmd_deltas=$(cm_deltas "$M0" "$M1")
echo "--- rxe counter changes: $deltas"
echo "--- ib_cm counter changes: $cmd_deltas"

# ---- verdict and result lines ----
resline() {  # resline OUTPUT: what the tool says about its run
  case $tool in
    rping) local n; n=$(echo "$1" | grep -c '^ping data: rdma-ping-')
           [ "$n" -gt 0 ] && echo "$n ping data lines, last $(echo "$1" | grep '^ping data: rdma-ping-' | tail -1 | cut -d: -f2 | tr -d ' ')" ;;
    ucmatose|udaddy) echo "$1" | grep -E '^return status|data transfers complete|^test complete' | tr '\n' ',' | sed 's/,$//; s/,/, /g' ;;
    *_bw) echo "$1" | awk '/#bytes/ { u = $0; sub(/.*BW average\[/, "", u); sub(/\].*/, "", u); h = 1; next }
            h && /^ *[0-9]+ +[0-9]+ / { printf "%s B x %s: BW peak %s, BW average %s %s, MsgRate %s Mpps\n", $1, $2, $3, $4, u, $5; exit }' ;;
    *_lat) echo "$1" | awk '/#bytes/ { h = 1; next }
            h && /^ *[0-9]+ +[0-9]+ / { printf "%s B x %s: t_min %s, t_typical %s, t_avg %s, t_max %s usec, 99%% %s, 99.9%% %s\n", $1, $2, $3, $5, $6, $4, $8, $9; exit }' ;;
  esac | sed -E 's/^ +//; s/[[:space:]]+/ /g'
}
cres=$(resline "$cout"); sres=$(resline "$sout")
result "client ($CLI, exit $crc, $ct s): ${cres:-no result}"
result "server ($SRV, exit $src): ${sres:-no result}"
while IFS= read -r l; do result "br0 CM $l"; done <<<"$mads"
[ $PS = UDP ] || result "br0 CM $dreqs"
while IFS= read -r l; do result "br0 $l"; done <<<"$icrc"
[ "${dropped:-0}" = 0 ] || result "br0 capture: $dropped frames dropped by the kernel (not in the counts above)"
result "guest ib_cm: $cmd_deltas; rxe: ${deltas% }"
[ -z "$cli_stopped" ] || fail "server ($SRV) exit status $src: $(echo "$sout" | grep -v '^ *$' | tail -1) (the client, still waiting 10 s later, was stopped)"
[ $crc -eq 0 ] || fail "client ($CLI) exit status $crc: $(echo "$cout" | grep -v '^ *$' | tail -1)"
[ $src -eq 0 ] || fail "server ($SRV) exit status $src: $(echo "$sout" | grep -v '^ *$' | tail -1)"
case $tool in
  rping) [ "$(echo "$cout" | grep -c '^ping data: rdma-ping-')" -eq 1000 ] || fail "client: not 1000 ping data lines ($cres)" ;;
  ucmatose|udaddy)
    for o in "$cout" "$sout"; do echo "$o" | grep -q '^return status 0' || fail "a side did not print 'return status 0'"; done ;;
  *) [ -n "$cres" ] && [ -n "$sres" ] || fail "no perftest result row from $([ -n "$cres" ] && echo server || echo client)" ;;
esac
[ "$frames" -gt 0 ] || fail "no RoCE v2 frame seen on br0"
[ $icrc_rc -eq 0 ] || fail "frames with a wrong ICRC on br0 ($PCAP)"
[ $mads_rc -eq 0 ] || fail "CM MADs that tshark does not decode: $(echo "$mads" | grep -m1 -E '^(bad|no) ')"
# the handshake, each message in its direction
has() { echo "$mads" | grep "^$1->$2: " | grep -qw "$3"; }
if [ $PS = UDP ]; then
  need="$CLI_IP $SRV_IP ServiceIDResReq;$SRV_IP $CLI_IP ServiceIDResReqResp"
else
  need="$CLI_IP $SRV_IP ConnectRequest;$SRV_IP $CLI_IP ConnectReply;$CLI_IP $SRV_IP ReadyToUse"
fi
IFS=';' read -ra needs <<<"$need"
for n in "${needs[@]}"; do
  # shellcheck disable=SC2086
  set -- $n; has "$1" "$2" "$3" || fail "no $3 from $1 to $2 on br0"
done
case $tool in
  rping|ucmatose) echo "$mads" | grep -qw DisconnectRequest && echo "$mads" | grep -qw DisconnectReply \
    || fail "no DisconnectRequest / DisconnectReply pair on br0" ;;
esac
# a passing check's capture is only kept when small (the bandwidth run makes ~70 MB)
[ "$(stat -c %s "$PCAP")" -lt 20000000 ] || { rm -f "$PCAP"; echo "(capture removed: large, check passed)"; }
