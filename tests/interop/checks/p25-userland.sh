# Debian trixie's userland in the rxe guest (/opt/p25, lib/guest-build.sh build_p25): its own
# dynamic loader and glibc run, its libibverbs loads its own rxe provider and sees rxe0 as
# bookworm's does, and its perftest's version string (what it sends in the version exchange:
# 6.28 or newer would negotiate parameters with rnic, older does not).
ensure_rxe0
out=$(gx rxe --timeout 30 'chroot /opt/p25 /lib64/ld-linux-x86-64.so.2 --version | head -1') || fail "trixie's ld.so does not run: $out"
result "loader: $out"
glibc=$(echo "$out" | grep -oE 'version [0-9]+\.[0-9]+' | cut -d' ' -f2)
[ -n "$glibc" ] || fail "no glibc version in: $out"
# LD_DEBUG=libs: the provider the loader initialises, by path inside the chroot
out=$(gx rxe --timeout 30 'LD_DEBUG=libs chroot /opt/p25 ibv_devinfo -d rxe0 2>&1') || fail "trixie's ibv_devinfo -d rxe0 failed: $(echo "$out" | tail -2)"
prov=$(echo "$out" | grep -oE 'calling init: [^ ]*librxe[^ ]*' | head -1)
[ -n "$prov" ] || fail "trixie's libibverbs did not load an rxe provider"
result "provider: ${prov#calling init: } (inside /opt/p25)"
echo "$out" | grep -v '^ *[0-9]*:' | grep -qE 'state:[[:space:]]+PORT_ACTIVE' || fail "trixie's ibv_devinfo does not show rxe0 PORT_ACTIVE"
result "ibv_devinfo (trixie): $(echo "$out" | grep -v '^ *[0-9]*:' | grep -E 'transport:|fw_ver:|state:' | sed -E 's/^[[:space:]]+//; s/[[:space:]]+/ /g' | tr '\n' ' ')"
out=$(gx rxe --timeout 30 'chroot /opt/p25 ib_write_bw --version; true')
ver=$(echo "$out" | sed -n 's/^ *Version: *//p' | head -1)
[ -n "$ver" ] || fail "no version from trixie's ib_write_bw --version: $out"
nego=no; awk -v v="$ver" 'BEGIN { exit !(v + 0 >= 6.28) }' && nego=yes
result "perftest (trixie) version string $ver: parameter negotiation (perftest >= 6.28): $nego"
