# rxe against rnic in the same guest (issue 13's ratio): ib_write_bw and ib_write_lat on rxe0 to
# itself, then `rnic write-bw --loopback` and `rnic write-lat --loopback` (the emulated pair,
# in-process) in that same guest, all at path MTU 1024 (rxe0's active MTU on the 1500-byte
# eth0). The result line has both and the ratios; it passes when all four runs do.
ensure_rxe0
gx rxe --timeout 10 '[ -x /opt/bin/rnic ]' || fail "no /opt/bin/rnic in the rxe guest (rnic_initrd)"
PT="-d rxe0 -x 1 -F -n 1000 -m 1024"
self_pair() {  # self_pair TOOL: server and client of perftest TOOL on rxe0, the client's output
  gx rxe --timeout 300 "($1 $PT >/tmp/srv.log 2>&1 </dev/null &) ; sleep 2; timeout 250 $1 $PT 10.11.0.2 >/tmp/cli.log 2>&1; rc=\$?; sleep 1; cat /tmp/cli.log; [ \$rc -eq 0 ]"
}
row() { awk '$1 ~ /^[0-9]+$/ && NF >= 5' | tail -1; }
out=$(self_pair ib_write_bw) || { echo "$out"; fail "ib_write_bw rxe0 to itself failed"; }
echo "$out"; rxe_bw=$(echo "$out" | row | awk '{print $4}')
out=$(self_pair ib_write_lat) || { echo "$out"; fail "ib_write_lat rxe0 to itself failed"; }
echo "$out"; rxe_lat=$(echo "$out" | row | awk '{print $5}')
out=$(gx rxe --timeout 300 "timeout 250 /opt/bin/rnic write-bw --loopback -n 1000 -m 1024") \
  || { echo "$out"; fail "rnic write-bw --loopback in the guest failed"; }
echo "$out"; rnic_bw=$(echo "$out" | row | awk '{print $4}')
out=$(gx rxe --timeout 300 "timeout 250 /opt/bin/rnic write-lat --loopback -n 1000 -m 1024") \
  || { echo "$out"; fail "rnic write-lat --loopback in the guest failed"; }
echo "$out"; rnic_lat=$(echo "$out" | row | awk '{print $5}')
for v in rxe_bw rxe_lat rnic_bw rnic_lat; do [ -n "${!v}" ] || fail "no result row for $v"; done
ratios=$(awk -v a="$rnic_bw" -v b="$rxe_bw" -v c="$rnic_lat" -v d="$rxe_lat" \
  'BEGIN { printf "bandwidth rnic/rxe %.2f, latency rnic/rxe %.2f", a / b, c / d }')
result "64 KiB WRITE BW average: rxe0 to itself $rxe_bw MiB/s, rnic --loopback $rnic_bw MiB/s; 2 B WRITE t_typical: rxe0 $rxe_lat us, rnic $rnic_lat us; $ratios"
