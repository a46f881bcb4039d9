# pair.sh with rnic on a TAP on br0 (emu-tap:rtap0,10.11.0.4/24) instead of its UDP link: no IP
# on the host side for the TAP and no static neighbour entry anywhere (the guest's neighbours
# flushed first), so the guest finds rnic's RoCE address by ARP, which rnic's own agent answers,
# and rnic finds the guest the same way. The TCP exchange goes to the namespace's address as in
# pair.sh; every RoCE frame on br0 is captured and its ICRC recomputed there.
# usage: tap-pair.sh ROLE TOOL [ARGS...]   (as pair.sh)
TAP=rtap0
in_ns ip tuntap add dev $TAP mode tap 2>/dev/null
in_ns ip link set $TAP master br0 up || fail "could not put $TAP on br0"
trap 'in_ns ip link del $TAP 2>/dev/null' EXIT
gx rxe --timeout 10 "/usr/sbin/ip neigh flush dev eth0" >/dev/null
RNIC_DEV="emu-tap:$TAP,10.11.0.4/24"
. checks/pair.sh "$@"
