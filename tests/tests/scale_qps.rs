//! Scale (issue 13 item 5): 10,000 RC QPs on one emulated device, created and connected
//! through the driver, with the time per QP and the resident memory per QP printed. A
//! measurement, not a timed assertion, so it is ignored by default:
//!
//! ```text
//! cargo test --release -p rnic-tests --test scale_qps -- --ignored --nocapture
//! ```
//!
//! The ConnectX-4 profile allows it (`log_max_qp` 23); the default test profile stops at
//! 2^12 QPs.
#![allow(missing_docs)]

#[path = "driver_fixture.rs"]
mod driver_fixture;

use driver_fixture::IP;
use rnic_driver::cq::Cq;
use rnic_driver::pd::Pd;
use rnic_driver::qp::{Mtu, Qp, QpConfig, QpType};
use rnic_driver::{Hca, HcaConfig};
use rnic_emulator::{Device, Profile, RunMode};
use rnic_hw_regs::Bus;
use std::sync::Arc;
use std::time::Instant;

/// QPs the test creates.
const QPS: usize = 10_000;

/// The process's resident set (VmRSS), in KiB.
fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

#[test]
#[ignore = "a measurement (run with --ignored --nocapture)"]
fn ten_thousand_rc_qps_on_one_device() {
    let dev = Device::new(Profile::connectx4(), RunMode::Deterministic);
    let bus = Arc::new(driver_fixture::RecordingBus {
        inner: dev.bus(),
        record: false.into(),
        writes64: Default::default(),
    });
    let dynbus: Arc<dyn Bus> = bus.clone();
    let cfg = HcaConfig {
        ipv4: Some(IP),
        ..HcaConfig::default()
    };
    let hca = Arc::new(Hca::open(dynbus, cfg).expect("bring-up"));
    let pd = Arc::new(Pd::alloc(&hca).expect("ALLOC_PD"));
    // Fields drop in order: the PD and the HCA before the device.
    let fx = driver_fixture::Fx { pd, hca, bus, dev };
    let cq = Arc::new(Cq::create(&fx.hca, 1024, None).expect("CREATE_CQ"));
    let pd = &fx.pd;

    let rss0 = rss_kib();
    let t0 = Instant::now();
    let qps: Vec<Qp> = (0..QPS)
        .map(|i| {
            Qp::create(pd, &QpConfig::new(QpType::Rc, cq.clone(), cq.clone()))
                .unwrap_or_else(|e| panic!("CREATE_QP {i}: {e}"))
        })
        .collect();
    let create = t0.elapsed();
    let rss1 = rss_kib();
    // Connect them in pairs (RST -> INIT -> RTR -> RTS), each to its neighbour on this device.
    let t1 = Instant::now();
    for pair in qps.chunks(2) {
        fx.connect(&pair[0], pair[1].qpn(), Mtu::Mtu1024);
        fx.connect(&pair[1], pair[0].qpn(), Mtu::Mtu1024);
    }
    let connect = t1.elapsed();
    let rss2 = rss_kib();
    // An idle device with 10,000 QPs: no timer is armed, so stepping looks at none of them.
    let t2 = Instant::now();
    for _ in 0..1000 {
        fx.dev.step();
    }
    let idle = t2.elapsed();
    assert_eq!(fx.dev.next_timer_ns(), None);

    let per = |d: std::time::Duration| d.as_secs_f64() * 1e6 / QPS as f64;
    println!(
        "scale: {QPS} RC QPs: CREATE_QP {:.1} us/QP ({:.2} s), connect to RTS {:.1} us/QP; \
         RSS +{:.1} KiB/QP at creation ({} -> {} KiB), +{:.2} KiB/QP connecting; \
         1000 idle device steps {:.1} us",
        per(create),
        create.as_secs_f64(),
        per(connect),
        (rss1.saturating_sub(rss0)) as f64 / QPS as f64,
        rss0,
        rss1,
        (rss2.saturating_sub(rss1)) as f64 / QPS as f64,
        idle.as_secs_f64() * 1e6,
    );
    drop(qps);
    drop(cq);
    drop(fx);
}
