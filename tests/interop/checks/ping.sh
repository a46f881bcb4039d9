# IP between the namespace's bridge (10.11.0.1, where rnic binds) and the rxe guest (10.11.0.2),
# both ways.
out=$(in_ns ping -c 3 -W 5 10.11.0.2) || { echo "$out"; fail "ping 10.11.0.2 from the namespace failed"; }
echo "$out"
result "host->guest: $(echo "$out" | grep -E 'packets transmitted') ($(echo "$out" | grep -oE 'rtt [^ ]+ = [^ ]+ ms' | sed 's/rtt //'))"
out=$(gx rxe --timeout 30 "ping -c 3 -W 5 $NET_HOST") || { echo "$out"; fail "ping $NET_HOST from the guest failed"; }
echo "$out"
result "guest->host: $(echo "$out" | grep -E 'packets transmitted')"
