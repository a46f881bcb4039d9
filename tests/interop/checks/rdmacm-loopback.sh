# The guest's own connection manager, before any rnic check blames rnic for a CM failure: the
# kernel's ib_cm, iw_cm, rdma_cm and rdma_ucm are loaded, librdmacm's device is there, and
# rdmacm-utils' rping server and client on rxe0 to itself (10.11.0.2) both exit 0 after 10
# validated pings (-V; the client prints each with -v). The ib_cm counters of rxe0 must show
# the handshake (REQ, REP, RTU) and the teardown (DREQ, DREP) sent and received.
ensure_rxe0
mods=$(gx rxe --timeout 10 'cat /proc/modules') || fail "cannot read the guest's /proc/modules"
missing=
for m in ib_cm iw_cm rdma_cm rdma_ucm ib_uverbs; do
  echo "$mods" | grep -q "^$m " || missing="$missing $m"
done
[ -z "$missing" ] || fail "kernel modules not loaded in the guest:$missing"
gx rxe --timeout 10 '[ -c /dev/infiniband/rdma_cm ]' || fail "no /dev/infiniband/rdma_cm in the guest (rdma_ucm)"
gx rxe --timeout 10 'command -v rping ucmatose udaddy rdma_server rdma_client' \
  || fail "rdmacm-utils' binaries are not all in the guest"

A=10.11.0.2 N=10
C0=$(cm_counters rxe) || fail "no ib_cm counters for rxe0 in the guest"
# the server first; the client once rdma_cm shows the server's id listening on rping's port
out=$(gx rxe --timeout 120 "rm -f /tmp/rs.log; timeout 100 rping -s -a $A -C $N -V >/tmp/rs.log 2>&1 </dev/null & S=\$!; \
  i=0; while ! /usr/sbin/rdma res show cm_id | grep -q 'state LISTEN.*$A:7174'; do i=\$((i + 1)); [ \$i -gt 50 ] && break; sleep 0.2; done; \
  timeout 90 rping -c -a $A -C $N -V -v; c=\$?; wait \$S; s=\$?; \
  echo '--- server'; cat /tmp/rs.log; echo \"client-rc=\$c server-rc=\$s\"")
echo "$out"
C1=$(cm_counters rxe)
deltas=$(cm_deltas "$C0" "$C1")
echo "--- ib_cm counter changes: $deltas"
crc=$(echo "$out" | sed -n 's/^client-rc=\([0-9]*\) .*/\1/p')
src=$(echo "$out" | sed -n 's/.* server-rc=\([0-9]*\)$/\1/p')
pings=$(echo "$out" | grep -c '^ping data: rdma-ping-')
result "rping -c -a $A -C $N -V -v: exit ${crc:-?}, $pings ping data lines; rping -s: exit ${src:-?}"
result "ib_cm counters: $deltas"
[ "$crc" = 0 ] || fail "rping client exit status ${crc:-unknown}: $(echo "$out" | grep -v '^ping data' | tail -3 | tr '\n' ' ')"
[ "$src" = 0 ] || fail "rping server exit status ${src:-unknown}"
[ "$pings" -eq $N ] || fail "$pings ping data lines, want $N"
for m in req rep rtu dreq drep; do
  for g in cm_tx_msgs cm_rx_msgs; do
    echo "$deltas" | grep -q "$g/$m +" || fail "ib_cm counter $g/$m did not change"
  done
done
