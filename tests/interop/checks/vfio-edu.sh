# The driver's VfioBus against the kernel's VFIO + IOMMU: bind QEMU's edu device (1234:11e8) to
# vfio-pci in the VFIO guest (q35, intel-iommu with interrupt remapping), then run vfio-edu
# (built on rnic_driver::vfio::VfioBus), which prints PASS/FAIL lines and a SUMMARY line. Its
# DMA to an unmapped IOVA must show up as a DMAR fault in the guest's kernel log.
find_edu='for d in /sys/bus/pci/devices/*; do [ "$(cat $d/vendor):$(cat $d/device)" = 0x1234:0x11e8 ] && echo ${d##*/}; done'
bdf=$(gx vfio --timeout 10 "$find_edu" | head -1)
[ -n "$bdf" ] || fail "no edu device (1234:11e8) in the guest's /sys/bus/pci/devices"
d=/sys/bus/pci/devices/$bdf
bind="echo vfio-pci > $d/driver_override && echo $bdf > /sys/bus/pci/drivers_probe && g=\$(basename \$(readlink $d/iommu_group)) && echo \"edu $bdf driver=\$(basename \$(readlink $d/driver)) iommu_group=\$g\" && [ -c /dev/vfio/\$g ]"
out=$(gx vfio --timeout 30 "$bind") || { echo "$out"; fail "binding edu $bdf to vfio-pci failed: $out"; }
echo "$out"; result "$out"
out=$(gx vfio --timeout 120 "timeout 100 vfio-edu $bdf"); rc=$?
echo "$out"
summary=$(echo "$out" | grep -m1 '^SUMMARY')
[ -n "$summary" ] || fail "vfio-edu printed no SUMMARY line (exit status $rc): $(echo "$out" | tail -1)"
# the steps that carry the evidence, plus every failure
echo "$out" | grep -E '^(FAIL|PASS (open|dma-mask|dma-dev-to-ram|msi-dma-done|msi-loop) )' | sed -E 's/ +\[ *[0-9.]+s\]//; s/^/result: /'
result "$summary"
[ $rc -eq 0 ] || fail "vfio-edu exit status $rc: $(echo "$out" | grep -m1 '^FAIL')"
dmesg=$(gx vfio --timeout 20 'dmesg | grep -E "DMAR|vfio"')
echo "$dmesg"
fault=$(echo "$dmesg" | grep -m1 'fault addr 0xff00000') \
  || fail "no DMAR fault logged for the DMA to the unmapped IOVA 0xff00000"
result "guest kernel: ${fault#*] }"
