//! Replays a log of `rx_frames` inputs (`RNIC_FUZZ_LOG`) on a fresh live device, in order,
//! and prints the index of the frame whose checks fail. With a second argument N, replays
//! only the frames whose indexes are listed in the file of that name (one per line).
//!
//! `cargo +nightly run --release --example replay_rx -- LOG [INDEXES]`

use rnic_fuzz::rx::rx_frame;
use rnic_fuzz::{LiveDevice, Peer};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let log = std::fs::read(&args[1]).expect("log");
    let mut frames = Vec::new();
    let mut rest = &log[..];
    while rest.len() >= 4 {
        let n = u32::from_le_bytes(rest[..4].try_into().unwrap()) as usize;
        frames.push(rest[4..4 + n].to_vec());
        rest = &rest[4 + n..];
    }
    let pick: Option<Vec<usize>> = args.get(2).map(|p| {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(|l| l.trim().parse().unwrap())
            .collect()
    });
    let order: Vec<usize> = pick.unwrap_or_else(|| (0..frames.len()).collect());
    let mut d = LiveDevice::new(Peer::Remote);
    for &i in &order {
        let f = frames[i].clone();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rx_frame(&mut d, &f)));
        if r.is_err() {
            println!("FAIL at {i} of {}", frames.len());
            std::process::exit(1);
        }
    }
    println!("PASS {}", order.len());
}
