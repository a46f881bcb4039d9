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
