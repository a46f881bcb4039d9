//! A flood on the in-process link: the receiving device's queue is bounded, what it cannot
//! take is dropped and counted in its own counters (`ring_full`), and the frames it took are
//! each dropped under their rule (junk is not RoCE v2, and with no NIC RX flow table set it is
//! `steering_no_root`), so `rx_dropped` stays the sum of the rules.

use rnic_emulator::link::{InProcLink, Link, QUEUE_FRAMES};
use rnic_emulator::{Device, Profile, RunMode};

#[test]
fn a_flood_beyond_the_queue_is_ring_full_at_the_receiver() {
    let (a, mut peer) = InProcLink::pair();
    let dev = Device::with_link(Profile::default(), RunMode::Deterministic, a);
    let extra = 1000;
    // 1 KiB of junk per frame, more than the queue holds, with the device not running.
    for _ in 0..QUEUE_FRAMES + extra {
        peer.transmit(&[0xA5; 1024]);
    }
    assert_eq!(peer.dropped(), extra as u64);
    dev.step();
    let c = dev.counters();
    assert_eq!(c.drops.ring_full, extra as u64);
    assert_eq!(c.drops.steering_no_root, QUEUE_FRAMES as u64);
    assert_eq!(c.rx_dropped, c.drops.total());
    // The queue drained and took nothing more than it holds.
    peer.transmit(&[0xA5; 1024]);
    dev.step();
    assert_eq!(dev.counters().drops.ring_full, extra as u64, "counted once");
    assert_eq!(
        dev.counters().drops.steering_no_root,
        QUEUE_FRAMES as u64 + 1
    );
}
