//! The driver's data path on the emulated bus, with the device not consuming work: a
//! deterministic emulator with auto-step off (doorbells queue and nothing runs; the queue is
//! drained outside the timed region, where the device drops doorbells for the QP, which
//! stays in RST). What is timed is the driver only:
//!
//! - `post_one`: one SEND WQE (one 64-byte SGE, unsignaled) with its own doorbell;
//! - `post_list32`: SEND WQEs in lists of 32 behind one doorbell (time per WQE);
//! - `poll`: CQEs polled in batches of 16 (time per CQE); requester CQEs are written into
//!   the CQ ring through host memory beforehand, for WQEs that were really posted.
//!
//! Between timed rounds the posted WQEs are retired the way the device would do it: one
//! requester CQE for the last (signaled) WQE, polled.
//!
//! `cargo bench -p rnic-driver --bench datapath -- --warm-up-time 1 --measurement-time 3`
#![allow(missing_docs)]

use criterion::{Criterion, black_box, criterion_group, criterion_main};
use rnic_driver::cq::Cq;
use rnic_driver::mr::Mr;
use rnic_driver::pd::Pd;
use rnic_driver::qp::{Qp, QpCaps, QpConfig, QpType};
use rnic_driver::wr::{Access, Payload, SendFlags, SendOp, SendWr, WorkCompletion};
use rnic_driver::{Hca, HcaConfig};
use rnic_emulator::{Device, Profile, RunMode};
use rnic_hw_regs::Bus;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Rig {
    dev: Device,
    cq: Arc<Cq>,
    qp: Qp,
    mr: Mr,
    /// WQEBB counter of the next WQE (one WQEBB per SEND with one SGE).
    next: u16,
}

impl Rig {
    fn new() -> (Rig, Arc<Hca>) {
        let dev = Device::new(Profile::default(), RunMode::Deterministic);
        let bus: Arc<dyn Bus> = Arc::new(dev.bus());
        let hca = Arc::new(
            Hca::open(
                bus,
                HcaConfig {
                    ipv4: Some(Ipv4Addr::new(192, 0, 2, 1)),
                    ..HcaConfig::default()
                },
            )
            .expect("bring-up"),
        );
        let pd = Arc::new(Pd::alloc(&hca).expect("PD"));
        let cq = Arc::new(Cq::create(&hca, 4096, None).expect("CQ"));
        let mut cfg = QpConfig::new(QpType::Rc, cq.clone(), cq.clone());
        cfg.caps = QpCaps {
            max_send_wr: 1024,
            max_send_sge: 1,
            max_inline_data: 0,
            ..QpCaps::default()
        };
        let qp = Qp::create(&pd, &cfg).expect("QP");
        let mr = Mr::alloc(&pd, 4096, Access::ALL).expect("MR");
        dev.set_auto_step(false);
        (
            Rig {
                dev,
                cq,
                qp,
                mr,
                next: 0,
            },
            hca,
        )
    }

    /// Writes a requester CQE for the WQE at `counter` into the CQ ring (host memory), as the
    /// device would.
    fn inject_req(&self, k: u32, counter: u16) {
        let (ring, _) = self.cq.cqe_ring();
        let n = self.cq.capacity();
        let ci = self.cq.consumer_index().wrapping_add(k);
        let off = (ci % n) as usize * 64;
        let mut c = [0u8; 64];
        c[0x2C..0x30].copy_from_slice(&64u32.to_be_bytes());
        c[0x38..0x3C].copy_from_slice(&((0x0Au32 << 24) | self.qp.qpn()).to_be_bytes());
        c[0x3C..0x3E].copy_from_slice(&counter.to_be_bytes());
        c[0x3F] = ((ci / n) & 1) as u8; // opcode REQ (0), owner bit of the pass
        // SAFETY: the entry is inside the live ring; volatile writes, op_own last.
        unsafe {
            let p = ring.as_ptr().add(off);
            for (i, b) in c.iter().enumerate() {
                p.add(i).write_volatile(*b);
            }
        }
    }

    /// Retires everything posted: the device's view (drain its doorbell queue) and the
    /// driver's (one CQE for the last WQE, polled).
    fn retire(&mut self, posted: u16) {
        self.dev.step();
        if posted == 0 {
            return;
        }
        self.inject_req(0, self.next.wrapping_sub(1));
        let mut wc = [WorkCompletion::default(); 1];
        assert_eq!(self.cq.poll(&mut wc), Ok(1));
    }
}

fn benches(c: &mut Criterion) {
    let (mut rig, _hca) = Rig::new();
    let sge = [rig.mr.sge(0, 64)];
    let one = |flags| SendWr {
        wr_id: 7,
        op: SendOp::Send,
        payload: Payload::Sgl(&sge),
        flags,
        ud: None,
    };
    let plain = one(SendFlags::NONE);
    let last = one(SendFlags::SIGNALED);
    let mut list = [plain; 32];
    list[31] = last;

    c.bench_function("post_one", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let batch = left.min(256);
                let t = Instant::now();
                for _ in 0..batch {
                    rig.qp.post_send(black_box(&[plain])).expect("post");
                }
                total += t.elapsed();
                rig.next = rig.next.wrapping_add(batch as u16);
                rig.retire(batch as u16);
                left -= batch;
            }
            total
        })
    });

    c.bench_function("post_list32_per_wqe", |b| {
        b.iter_custom(|iters| {
            // One iteration is one WQE; whole lists of 32 are posted.
            let lists = iters.div_ceil(32).max(1);
            let mut total = Duration::ZERO;
            let mut left = lists;
            while left > 0 {
                let batch = left.min(8);
                let t = Instant::now();
                for _ in 0..batch {
                    rig.qp.post_send(black_box(&list)).expect("post");
                }
                total += t.elapsed();
                rig.next = rig.next.wrapping_add(32 * batch as u16);
                rig.retire(32 * batch as u16);
                left -= batch;
            }
            total.mul_f64(iters as f64 / (lists * 32) as f64)
        })
    });

    c.bench_function("poll_per_cqe", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters;
            let mut wc = [WorkCompletion::default(); 16];
            while left > 0 {
                let k = left.min(512) as u16;
                // Untimed: k signaled WQEs and their CQEs.
                let sig = [last];
                for _ in 0..k {
                    rig.qp.post_send(&sig).expect("post");
                }
                for i in 0..k {
                    rig.inject_req(u32::from(i), rig.next.wrapping_add(i));
                }
                rig.next = rig.next.wrapping_add(k);
                rig.dev.step();
                let mut got = 0usize;
                let t = Instant::now();
                while got < usize::from(k) {
                    got += rig.cq.poll(black_box(&mut wc)).expect("poll");
                }
                total += t.elapsed();
                left -= u64::from(k);
            }
            total
        })
    });
    // Teardown (DESTROY_* commands) needs the device to run commands again; with auto-step
    // off each would wait out the command timeout.
    rig.dev.set_auto_step(true);
}

criterion_group!(datapath, benches);
criterion_main!(datapath);
