# The rxe guest: create rxe0 on eth0 and check what ibv_devinfo -v reports: an active port with
# GID[1] = ::ffff:10.11.0.2 (RoCE v2), the GID index the pair checks use (-g 1 / -x 1).
gx rxe --timeout 30 '/usr/sbin/rdma link add rxe0 type rxe netdev eth0' \
  || fail "rdma link add rxe0 type rxe netdev eth0 failed"
gx rxe --timeout 10 '/usr/sbin/rdma link show'
out=$(gx rxe --timeout 60 'ibv_devinfo -v -d rxe0') || fail "ibv_devinfo -v -d rxe0 failed: $(echo "$out" | tail -1)"
echo "$out"
field() { echo "$out" | grep -m1 -E "^[[:space:]]*$1:" | sed -E "s/^[[:space:]]*$1:[[:space:]]*//"; }
state=$(field state); mtu=$(field active_mtu); ll=$(field link_layer)
gid1=$(echo "$out" | grep -m1 -E 'GID\[ *1\]:' | sed -E 's/.*GID\[ *1\]:[[:space:]]*//')
echo "$state" | grep -q PORT_ACTIVE || fail "rxe0 port state is '$state', not PORT_ACTIVE"
[ "$ll" = Ethernet ] || fail "rxe0 link_layer is '$ll'"
[ "$gid1" = '::ffff:10.11.0.2, RoCE v2' ] || fail "rxe0 GID[1] is '$gid1', want '::ffff:10.11.0.2, RoCE v2'"
result "rxe0 $state, active_mtu $mtu, link_layer $ll, GID[1] $gid1"
