# The private network: one network namespace per harness run, so nothing addressed to
# 10.11.0.0/24 can leave the machine.
#   netns $NS:  br0 10.11.0.1/24 (the host side; rnic binds here)  <- tap0 (rxe guest 10.11.0.2)
#                                                                   <- tap1 (spare: 10.11.0.3)
NS=rnic-interop-$$
NET_HOST=10.11.0.1
NET_PREFIX=24
NET_HOST_MAC=02:0b:0a:0b:00:01

net_up() {
  # namespaces left by earlier runs that died without cleanup (their pid is gone)
  local old
  for old in $(ip netns list | awk '/^rnic-interop-[0-9]+/ { print $1 }'); do
    kill -0 "${old##*-}" 2>/dev/null || { ip netns del "$old" && info "removed stale netns $old"; }
  done
  ip netns add "$NS" || { err "net: ip netns add $NS failed"; return 1; }
  on_exit net_down
  ip -n "$NS" link set lo up &&
  # A fixed MAC: a bridge without one takes the lowest of its ports', so a check that puts a
  # TAP on br0 (tap-agent, tap-*) could change it and back, and the guest, which had learned
  # 10.11.0.1 meanwhile, sent the next check's frames to a MAC nobody had (seen: rping's REQs
  # to rnic on 10.11.0.1 flooded past the host for 30 s after tap-agent-rnic).
  ip -n "$NS" link add br0 address "$NET_HOST_MAC" type bridge stp_state 0 forward_delay 0 &&
  ip -n "$NS" addr add "$NET_HOST/$NET_PREFIX" dev br0 &&
  ip -n "$NS" link set br0 up || { err "net: bridge setup in $NS failed"; return 1; }
  local t
  for t in tap0 tap1; do
    ip -n "$NS" tuntap add dev $t mode tap &&
    ip -n "$NS" link set $t master br0 &&
    ip -n "$NS" link set $t up || { err "net: tap $t in $NS failed"; return 1; }
  done
  info "netns $NS: br0 $NET_HOST/$NET_PREFIX, tap0 tap1"
}

net_down() {
  ip netns list | grep -qw "^$NS" || return 0
  # whatever still runs in our namespace was started by this run: stop it
  local pids; pids=$(ip netns pids "$NS" 2>/dev/null | tr '\n' ' ')
  if [ -n "$pids" ]; then
    info "net: stopping processes left in $NS: $(ps -o pid=,comm= -p ${pids// /,} | tr -s ' \n' ' ')"
    kill $pids 2>/dev/null; sleep 1; kill -9 $pids 2>/dev/null
  fi
  ip netns del "$NS" && info "netns $NS removed"
}

# in_ns CMD...: run CMD inside the namespace (the host side of every check).
in_ns() { ip netns exec "$NS" "$@"; }
