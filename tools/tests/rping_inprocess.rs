//! `rnic rping` in this process on the emulated pair (emu0 192.0.2.1, emu1 192.0.2.2): a
//! connection to a port nobody listens on is rping's rejection and leaves nothing behind on
//! the client's device (its QP, CQ, buffers and CM agent are gone: the device's DMA
//! mappings are back to what they were), and the next rping on the same devices works. A
//! process of its own, so nothing else maps memory on the pair meanwhile.

use clap::Parser;
use rnic_cm::rdma_cm::{CmId, EventChannel};
use rnic_cm::wire::ip::PortSpace;
use rnic_tools::ToolError;
use rnic_tools::rping::run::{RpingArgs, main};
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Cmd {
    #[command(flatten)]
    a: RpingArgs,
}

fn args(v: &[&str]) -> RpingArgs {
    let mut all = vec!["rping"];
    all.extend_from_slice(v);
    Cmd::try_parse_from(all).expect("rping flags").a
}

#[test]
fn a_rejected_connection_leaves_nothing_behind_and_the_next_one_works() {
    let emu0 = rnic_verbs::Context::open("emu0").unwrap();
    let before = emu0.emulator().unwrap().dma_mappings();
    // emu1's CM runs (an id listens there), as a kernel's always does.
    let ch = EventChannel::new().unwrap();
    let other = CmId::new(&ch, PortSpace::Tcp);
    other.bind_addr("192.0.2.2:7189".parse().unwrap()).unwrap();
    other.listen(1).unwrap();

    let client = |port: &str| {
        main(&args(&[
            "-c",
            "-a",
            "192.0.2.2",
            "-p",
            port,
            "-C",
            "5",
            "-V",
            "--timeout",
            "20",
        ]))
    };
    let r = client("7191");
    assert!(matches!(r, Err(ToolError::Exit(255))), "{r:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while emu0.emulator().unwrap().dma_mappings() != before {
        assert!(
            Instant::now() < deadline,
            "emu0 keeps {} DMA mappings, had {before}",
            emu0.emulator().unwrap().dma_mappings()
        );
        std::thread::sleep(Duration::from_millis(10));
    }

    let server = std::thread::spawn(|| {
        main(&args(&[
            "-s",
            "-a",
            "192.0.2.2",
            "-p",
            "7190",
            "--timeout",
            "20",
        ]))
    });
    // The server's thread listens soon; until then the CM rejects the client.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match client("7190") {
            Ok(()) => break,
            Err(ToolError::Exit(255)) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("{e:?}"),
        }
    }
    server.join().unwrap().unwrap();
}
