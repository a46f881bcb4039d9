# The driver's VfioBus against the kernel's VFIO + IOMMU: bind QEMU's edu device to vfio-pci in
# the VFIO guest (q35, intel-iommu with interrupt remapping), then run vfio-edu (built on
# rnic_driver::vfio::VfioBus), which prints PASS/FAIL lines and a SUMMARY line.
bind='d=/sys/bus/pci/devices/0000:00:02.0; [ "$(cat $d/vendor):$(cat $d/device)" = 0x1234:0x11e8 ] || { echo "edu is not at 0000:00:02.0"; exit 1; }; echo vfio-pci > $d/driver_override; echo 0000:00:02.0 > /sys/bus/pci/drivers_probe; g=$(basename $(readlink $d/iommu_group)); echo "edu 0000:00:02.0 driver=$(basename $(readlink $d/driver)) iommu_group=$g"; [ -c /dev/vfio/$g ]'
gx vfio --timeout 30 "$bind" || fail "binding edu to vfio-pci failed"
out=$(gx vfio --timeout 120 'timeout 100 vfio-edu 0000:00:02.0'); rc=$?
echo "$out"
gx vfio --timeout 20 'dmesg | grep -iE "dmar|vfio" | tail -20'
echo "$out" | grep -E '^(PASS|FAIL)' | sed 's/^/result: /'
summary=$(echo "$out" | grep -m1 '^SUMMARY')
[ -n "$summary" ] || fail "vfio-edu printed no SUMMARY line (exit status $rc): $(echo "$out" | tail -1)"
result "$summary"
[ $rc -eq 0 ] || fail "vfio-edu exit status $rc: $(echo "$out" | grep -m1 '^FAIL')"
