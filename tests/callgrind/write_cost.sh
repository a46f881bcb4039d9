#!/bin/sh
# Instructions per RDMA WRITE end to end (driver + both emulated devices, deterministic), for
# one 64 KiB WRITE and one 8-byte WRITE at path MTU 4096 and 1024, and 8-byte WRITEs posted 32
# to a doorbell (what `rnic write-bw -s 8 -l 32` posts). Counts are exact and
# repeatable (callgrind), so two commits compare to the instruction:
#   tests/callgrind/write_cost.sh            # this tree
set -eu
cd "$(dirname "$0")/../.."
cargo build --release --locked -q -p rnic-tests --example write_cost
bin=target/release/examples/write_cost
iters=50
out=$(mktemp -d)
for mtu in 4096 1024; do
  for size in 65536 8; do
    valgrind --tool=callgrind --callgrind-out-file="$out/cg.$size.$mtu" \
      --toggle-collect='write_cost::timed' "$bin" "$size" "$iters" "$mtu" >/dev/null 2>"$out/err"
    ir=$(awk '/^(summary|totals):/ {print $2}' "$out/cg.$size.$mtu" | tail -1)
    echo "write_cost: $size B WRITE at MTU $mtu: $((ir / iters)) instructions per WRITE ($ir over $iters)"
  done
done
for mtu in 4096 1024; do
  valgrind --tool=callgrind --callgrind-out-file="$out/cg.batch.$mtu" \
    --toggle-collect='write_cost::timed' "$bin" 8 "$iters" "$mtu" 32 >/dev/null 2>"$out/err"
  ir=$(awk '/^(summary|totals):/ {print $2}' "$out/cg.batch.$mtu" | tail -1)
  echo "write_cost: 8 B WRITEs posted 32 at a time at MTU $mtu: $((ir / (iters * 32))) instructions per WRITE ($ir over $((iters * 32)))"
done
rm -rf "$out"
