# rnic on an emulated device whose port is a TAP on br0 (emu-tap:rtap0,10.11.0.4/24), with no
# IP on the host side for it and no static neighbour entry anywhere: the rxe guest finds it by
# ARP, which rnic's own agent answers (and rnic finds the guest the same way). Passes when the
# guest's `ping -c 5` gets 5 replies while rnic waits as the rc_pingpong server, the guest's
# neighbour table shows rnic's MAC, and `ibv_rc_pingpong -g 1 -c` passes against
# `rnic rc-pingpong -g 1 -c` in both roles. ARP and ICMP frames on br0 are captured and counted
# (the guest's requests, rnic's replies, announcements and requests, pings and their replies).
RNIC_IP=10.11.0.4
TAP=rtap0
DEV="emu-tap:$TAP,$RNIC_IP/24"
MAC=02:52:0a:0b:00:04   # emulated_mac(10.11.0.4)
GUEST_IP=10.11.0.2
TO=150
COMMON="-g 1 -n 1000 -c"
[ -x "$RNIC_BIN" ] || fail "no rnic binary at $RNIC_BIN"
ensure_rxe0
# A persistent TAP on the bridge, without an address: rnic's port is its far end.
in_ns ip tuntap add dev $TAP mode tap 2>/dev/null
in_ns ip link set $TAP master br0 up || fail "could not put $TAP on br0"
cleanup() { in_ns ip link del $TAP 2>/dev/null; }
trap cleanup EXIT
gx rxe --timeout 10 "/usr/sbin/ip neigh flush dev eth0" >/dev/null
# The address-resolution and ping frames on br0, counted at the end.
APCAP=$LOGDIR/checks/$CHECK.arp-icmp.pcap
ip netns exec "$NS" tcpdump -i br0 -n -U -s 0 -w "$APCAP" 'arp or icmp' 2>/dev/null & TD=$!
sleep 0.5
# rnic's server takes its TCP port first, then opens the device: ready once it prints its address
ready() { grep -q 'local address' "$LOGDIR/checks/$CHECK.server.log" 2>/dev/null; }

# ---- rnic the server: the guest pings it, then connects ----
in_ns timeout $TO "$RNIC_BIN" rc-pingpong -d "$DEV" $COMMON > "$LOGDIR/checks/$CHECK.server.log" 2>&1 &
HOSTPID=$!
for i in $(seq 150); do ready && break; sleep 0.2; done
ready || echo "(rnic's address line not seen after 30 s; trying anyway)"
pout=$(gx rxe --timeout 40 "ping -c 5 -W 5 $RNIC_IP"); prc=$?
echo "$pout"
neigh=$(gx rxe --timeout 10 "/usr/sbin/ip neigh show $RNIC_IP")
echo "--- guest neighbour entry: $neigh"
cout=$(gx rxe --timeout $((TO + 10)) "timeout $TO ibv_rc_pingpong -d rxe0 $COMMON $NET_HOST"); crc=$?
echo "--- guest client (exit $crc)"; echo "$cout"
wait $HOSTPID; src=$?
sout=$(cat "$LOGDIR/checks/$CHECK.server.log")
echo "--- rnic server (exit $src)"; echo "$sout"

# ---- rnic the client: the guest listens, rnic resolves it by ARP and connects ----
gx rxe --timeout 10 "rm -f /tmp/side.log; (timeout $TO ibv_rc_pingpong -d rxe0 $COMMON) >/tmp/side.log 2>&1 </dev/null & SIDE=\$!"
for i in $(seq 100); do gx rxe --timeout 10 'netstat -ltn | grep -q ":18515 "' >/dev/null && break; sleep 0.2; done
c2out=$(in_ns timeout $TO "$RNIC_BIN" rc-pingpong -d "$DEV" $COMMON $GUEST_IP 2>&1); c2rc=$?
echo "--- rnic client (exit $c2rc)"; echo "$c2out"
s2=$(gx rxe --timeout $((TO + 10)) 'wait $SIDE; echo "side-rc=$?"; cat /tmp/side.log')
s2rc=$(echo "$s2" | sed -n 's/^side-rc=//p' | head -1); s2rc=${s2rc:-125}
echo "--- guest server (exit $s2rc)"; echo "$s2"

sleep 0.5; kill -TERM $TD 2>/dev/null; wait $TD 2>/dev/null
count() { tcpdump -r "$APCAP" -n "$1" 2>/dev/null | wc -l; }
# ARP: opcode at byte 6, sender IP at 14, target IP at 24 (0x0a0b0004 = 10.11.0.4)
arp_req=$(count "arp and arp[6:2] == 1 and arp[24:4] == 0x0a0b0004 and not ether src $MAC")
arp_rep=$(count "arp and arp[6:2] == 2 and ether src $MAC")
arp_grat=$(count "arp and arp[6:2] == 1 and ether src $MAC and arp[14:4] == arp[24:4]")
arp_out=$(count "arp and arp[6:2] == 1 and ether src $MAC and arp[14:4] != arp[24:4]")
echo_req=$(count "icmp[icmptype] == 8 and dst host $RNIC_IP")
echo_rep=$(count "icmp[icmptype] == 0 and src host $RNIC_IP and ether src $MAC")
result "guest ping $RNIC_IP: $(echo "$pout" | grep -E 'packets transmitted')"
result "br0 capture: ARP requests from the guest for $RNIC_IP $arp_req, ARP replies from rnic $arp_rep, gratuitous ARPs from rnic $arp_grat, ARP requests from rnic $arp_out, echo requests to rnic $echo_req, echo replies from rnic $echo_rep"
result "guest neighbour: $neigh"
result "rnic server: $(echo "$sout" | grep -E 'usec/iter') / guest client: $(echo "$cout" | grep -E 'usec/iter')"
result "rnic client: $(echo "$c2out" | grep -E 'usec/iter') / guest server: $(echo "$s2" | grep -E 'usec/iter')"
[ $prc -eq 0 ] || fail "ping $RNIC_IP from the guest failed"
[ "$echo_rep" -ge 5 ] || fail "the capture holds $echo_rep echo replies from rnic's MAC, not 5"
[ "$arp_rep" -ge 1 ] || fail "no ARP reply from rnic's MAC in the capture"
echo "$pout" | grep -qE '5 packets received|5 received' || fail "ping: not 5 replies"
echo "$neigh" | grep -qi "$MAC" || fail "the guest's neighbour entry for $RNIC_IP is not rnic's MAC $MAC: $neigh"
[ $crc -eq 0 ] || fail "guest client exit status $crc"
[ $src -eq 0 ] || fail "rnic server exit status $src"
[ $c2rc -eq 0 ] || fail "rnic client exit status $c2rc"
[ "$s2rc" -eq 0 ] || fail "guest server exit status $s2rc"
