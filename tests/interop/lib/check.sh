# Helpers for checks/*.sh (each runs in its own bash, from tests/interop, with the harness's
# environment: HERE REPO CACHE NS RUNDIR LOGDIR NET_HOST RNIC_BIN).
#   result TEXT   a line kept in the summary (what was measured / seen)
#   fail TEXT     the reason for failing; exits
#   gx GUEST [--timeout S] CMD...   run shell commands in a guest (exit status of the last)
#   in_ns CMD...  run a host command inside the harness's network namespace
set -uo pipefail
result() { printf 'result: %s\n' "$*"; }
fail() { printf 'fail: %s\n' "$*"; exit 1; }
gx() {
  local name=$1; shift
  "$HERE/lib/guest.py" "$RUNDIR/$name.sock" run --log "$LOGDIR/$name.transcript" "$@"
}
in_ns() { ip netns exec "$NS" "$@"; }
# ensure_rxe0: the rxe device on the rxe guest's eth0 (created by the rxe-devinfo check).
ensure_rxe0() {
  gx rxe --timeout 30 '[ -e /sys/class/infiniband/rxe0 ] || /usr/sbin/rdma link add rxe0 type rxe netdev eth0' \
    || fail "rdma link add rxe0 type rxe netdev eth0 failed in the guest"
}
# cm_mads PCAP: the CM MADs of a capture (RoCE v2 UD SENDs to QP 1 on UDP 4791) as tshark's
# InfiniBand dissector decodes them, one line per direction ("SRC->DST: N MADs: ConnectRequest x1
# ReadyToUse x1 ...", in order of first appearance). Every frame to QP 1 must decode as a CM
# message with a name (MAD base version 1, class 0x07 version 2, Q_Key 0x80010000, source QP 1,
# nothing malformed); a frame that does not is printed with what was wrong and makes it return
# 1, as does a capture without a CM MAD.
cm_mads() {
  local pcap=$1 qp1=${1%.pcap}.qp1.pcap out
  # only the frames to QP 1 (BTH bytes 5-7), so a big capture is not dissected in full
  tcpdump -r "$pcap" -w "$qp1" 'udp dst port 4791 and (udp[12:4] & 0xffffff) = 1' 2>/dev/null \
    || { echo "cm_mads: tcpdump could not read $pcap"; return 1; }
  out=$(tshark -n -r "$qp1" -o infiniband.try_heuristic_first:FALSE --disable-protocol rpcordma \
          -T fields -E separator='|' -e frame.number -e ip.src -e ip.dst -e infiniband.deth.q_key \
          -e infiniband.deth.srcqp -e infiniband.mad.baseversion -e infiniband.mad.mgmtclass \
          -e infiniband.mad.classversion -e _ws.malformed -e _ws.col.Info 2>&1) \
    || { echo "cm_mads: tshark failed: $(echo "$out" | tail -1)"; return 1; }
  rm -f "$qp1"
  echo "$out" | awk -F'|' '
    NF < 10 { next }
    {
      d = $2 "->" $3; info = $10; sub(/^.*CM: /, "", info); sub(/[[:space:]]+$/, "", info)
      why = ""
      if ($10 !~ /CM: [A-Za-z]+/) why = why " not decoded as a CM message (" $10 ")"
      if ($4 != "" && $4 !~ /0x0*80010000$/) why = why " Q_Key " $4
      if ($5 != "" && $5 !~ /^0x0*1$/) why = why " source QP " $5
      if ($6 !~ /^0x0*1$/) why = why " base version " $6
      if ($7 !~ /^0x0*7$/) why = why " class " $7
      if ($8 !~ /^0x0*2$/) why = why " class version " $8
      if ($9 != "") why = why " malformed"
      if (why != "") { printf "bad MAD: frame %s %s:%s\n", $1, d, why; bad++; next }
      if (!(d in n)) dirs[++nd] = d
      n[d]++
      k = d SUBSEP info
      if (!(k in c)) order[d, ++no[d]] = info
      c[k]++
    }
    END {
      for (i = 1; i <= nd; i++) {
        d = dirs[i]; line = d ": " n[d] " CM MADs:"
        for (j = 1; j <= no[d]; j++) line = line " " order[d, j] " x" c[d, order[d, j]]
        print line
      }
      if (nd == 0) print "no CM MAD decoded"
      exit (bad || nd == 0) ? 1 : 0
    }'
}
# cm_unanswered_dreqs PCAP: the DREQs of a capture no DREP answered (matched by communication
# ID: a DREP's remote ID is its DREQ's local ID), as "N of M DREQs unanswered" and, when N > 0,
# the senders and IDs. A kernel's CM answers a DREQ even for an id its process already
# destroyed; a CM in a process that exited answers nothing.
cm_unanswered_dreqs() {
  tshark -n -r "$1" -o infiniband.try_heuristic_first:FALSE --disable-protocol rpcordma \
    -Y 'infiniband.mad.mgmtclass == 0x07 && (infiniband.mad.attributeid == 0x15 || infiniband.mad.attributeid == 0x16)' \
    -T fields -e ip.src -e infiniband.mad.attributeid -e infiniband.mad.data 2>/dev/null | awk '
    $2 ~ /0x0*15$/ { id = substr($3, 1, 8); if (!(id in dreq)) { dreq[id] = $1; n++ } }
    $2 ~ /0x0*16$/ { answered[substr($3, 9, 8)] = 1 }
    END {
      for (id in dreq) if (!(id in answered)) { u++; l = l " " dreq[id] ":0x" id }
      printf "%d of %d DREQs unanswered%s\n", u, n, (u ? " (from" l ")" : "")
    }'
}
# cm_counters GUEST: the guest's ib_cm counters of rxe0 port 1 (cm_tx_msgs, cm_tx_retries,
# cm_rx_msgs, cm_rx_duplicates, each per message: req, rep, rtu, rej, mra, dreq, drep, sidr_req,
# sidr_rep, lap, apr), one "GROUP/MESSAGE VALUE" a line; cm_deltas BEFORE AFTER: the ones that
# changed, "+N" each.
cm_counters() {
  gx "$1" --timeout 10 'cd /sys/class/infiniband/rxe0/ports/1 && for f in cm_*/*; do echo "$f $(cat $f)"; done'
}
cm_deltas() {
  local d
  d=$(awk 'NR == FNR { a[$1] = $2; next } $2 != a[$1] { printf "%s +%d ", $1, $2 - a[$1] }' <(echo "$1") <(echo "$2"))
  d=${d% }; echo "${d:-no change}"
}
