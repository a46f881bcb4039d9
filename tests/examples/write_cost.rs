//! The instruction cost of one RDMA WRITE end to end: the real driver posts it on device A,
//! A's requester builds the frames, an in-process link carries them to device B, whose
//! responder writes the memory and ACKs, and A's completer retires the WQE into the CQE the
//! driver polls. Both devices run deterministic (stepped by this thread), so a run under
//! `valgrind --tool=callgrind` counts the same instructions every time: the cost is
//! comparable across commits to the instruction.
//!
//! `tests/callgrind/write_cost.sh` runs it; by hand:
//!
//! ```text
//! cargo build --release -p rnic-tests --example write_cost
//! valgrind --tool=callgrind --toggle-collect='write_cost::timed' \
//!     target/release/examples/write_cost 65536 100     # SIZE ITERS [MTU [BATCH]]
//! ```
//!
//! Only `timed` (ITERS lists of BATCH WRITEs, default 1, each list posted with one doorbell
//! and only its last WRITE signaled, carried and polled) is counted; opening the devices,
//! connecting and a warm-up of 20 lists are not. A list of 32 small WRITEs is what
//! `rnic write-bw -s 8 -l 32` posts: the cost per WRITE of a message-rate run.
#![allow(missing_docs)]

use rnic_driver::cq::Cq;
use rnic_driver::mr::Mr;
use rnic_driver::pd::Pd;
use rnic_driver::qp::{AddressVector, InitAttr, Mtu, Qp, QpConfig, QpType, RtrAttr, RtsAttr};
use rnic_driver::wr::{Access, Payload, SendFlags, SendOp, SendWr, Sge, WcStatus, WorkCompletion};
use rnic_driver::{Hca, HcaConfig};
use rnic_emulator::link::InProcLink;
use rnic_emulator::{Device, Profile, RunMode};
use std::hint::black_box;
use std::net::Ipv4Addr;
use std::sync::Arc;

/// One side: its device, the driver's objects on it, and a registered buffer.
struct Side {
    mr: Mr,
    qp: Qp,
    cq: Arc<Cq>,
    pd: Arc<Pd>,
    hca: Arc<Hca>,
    dev: Device,
}

fn side(ip: Ipv4Addr, mac_last: u8, link: InProcLink, size: usize) -> Side {
    let profile = Profile {
        mac: [0x02, 0, 0, 0, 0, mac_last],
        port_mtu: 9000,
        ..Profile::default()
    };
    let dev = Device::with_link(profile, RunMode::Deterministic, link);
    let hca = Arc::new(
        Hca::open(
            Arc::new(dev.bus()),
            HcaConfig {
                ipv4: Some(ip),
                ..HcaConfig::default()
            },
        )
        .expect("bring-up"),
    );
    let pd = Arc::new(Pd::alloc(&hca).expect("ALLOC_PD"));
    let cq = Arc::new(Cq::create(&hca, 64, None).expect("CREATE_CQ"));
    let qp = Qp::create(&pd, &QpConfig::new(QpType::Rc, cq.clone(), cq.clone())).expect("QP");
    let mr = Mr::alloc(&pd, size.max(64), Access::ALL).expect("MR");
    Side {
        mr,
        qp,
        cq,
        pd,
        hca,
        dev,
    }
}

fn connect(s: &Side, peer: &Side, mtu: Mtu) {
    s.qp.to_init(&InitAttr {
        access: Access::REMOTE_WRITE,
        ..InitAttr::default()
    })
    .expect("RST2INIT");
    let gid = peer.hca.gid(1).expect("the peer's IPv4 GID").gid;
    let av = AddressVector {
        sgid_index: 1,
        dgid: gid,
        dmac: peer.hca.mac(),
        hop_limit: 64,
        ..AddressVector::default()
    };
    s.qp.to_rtr(&RtrAttr {
        path_mtu: Some(mtu),
        dest_qpn: Some(peer.qp.qpn()),
        rq_psn: 0,
        av: Some(av),
        max_dest_rd_atomic: 1,
        min_rnr_timer: 1,
    })
    .expect("INIT2RTR");
    s.qp.to_rts(&RtsAttr {
        sq_psn: 0,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        max_rd_atomic: 1,
    })
    .expect("RTR2RTS");
}

/// The list of `batch` WRITEs of `sge` to B that `write_once` posts on A: only the
/// last signaled, as perftest's `-l` posts them.
fn writes<'a>(b: &Side, sge: &'a [Sge], batch: usize) -> Vec<SendWr<'a>> {
    (0..batch)
        .map(|i| SendWr {
            wr_id: 1,
            op: SendOp::Write {
                raddr: b.mr.addr(),
                rkey: b.mr.rkey(),
            },
            payload: Payload::Sgl(sge),
            flags: if i + 1 == batch {
                SendFlags::SIGNALED
            } else {
                SendFlags::empty()
            },
            ud: None,
        })
        .collect()
}

/// One list of WRITEs posted on A (one doorbell), stepped until A polls its completion.
fn write_once(a: &Side, b: &Side, wrs: &[SendWr<'_>]) {
    a.qp.post_send(black_box(wrs)).expect("post");
    let mut wc = [WorkCompletion::default(); 1];
    for _ in 0..10_000 {
        b.dev.step();
        a.dev.step();
        if a.cq.poll(&mut wc).expect("poll") == 1 {
            assert_eq!(wc[0].status, WcStatus::Success);
            return;
        }
    }
    panic!("the WRITEs did not complete");
}

#[inline(never)]
fn timed(a: &Side, b: &Side, wrs: &[SendWr<'_>], iters: u32) {
    for _ in 0..iters {
        write_once(a, b, wrs);
    }
}

/// The longest list posted (the QP's send queue holds 64).
const MAX_BATCH: usize = 32;

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("SIZE ITERS [MTU [BATCH]] as numbers"))
        .collect();
    let size = args.first().copied().unwrap_or(65536) as u32;
    let iters = args.get(1).copied().unwrap_or(100) as u32;
    let mtu = Mtu::from_bytes(args.get(2).copied().unwrap_or(4096) as u32).expect("MTU");
    let batch = args.get(3).copied().unwrap_or(1) as usize;
    assert!(
        (1..=MAX_BATCH).contains(&batch),
        "BATCH is 1 to {MAX_BATCH}"
    );
    let (la, lb) = InProcLink::pair();
    let a = side(Ipv4Addr::new(192, 0, 2, 1), 1, la, size as usize);
    let b = side(Ipv4Addr::new(192, 0, 2, 2), 2, lb, size as usize);
    connect(&a, &b, mtu);
    connect(&b, &a, mtu);
    a.mr.write(0, &vec![0x5A; size as usize]);
    let sge = [a.mr.sge(0, size)];
    let wrs = writes(&b, &sge, batch);
    for _ in 0..20 {
        write_once(&a, &b, &wrs);
    }
    timed(&a, &b, &wrs, iters);
    let mut back = vec![0u8; size as usize];
    b.mr.read(0, &mut back);
    assert!(back.iter().all(|&x| x == 0x5A), "the data arrived");
    println!(
        "{} WRITEs of {size} B at MTU {} ({iters} lists of {batch}) done",
        iters as usize * batch,
        mtu.bytes()
    );
    drop((a.pd, b.pd));
}
