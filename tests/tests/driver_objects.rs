//! The driver's objects on the emulated device: create and destroy of every object in any
//! order (handles keep what they depend on alive), QP state transitions with their
//! attributes and errors, QUERY_QP, error CQEs (bad lkey, rkey, bounds, access), QP to ERR
//! flushing, and 10,000 create/destroy cycles of QP + CQ + MR leaking nothing.

#[path = "driver_fixture.rs"]
mod fixture;

use fixture::*;
use rnic_driver::DriverError;
use rnic_driver::ah::AddressHandle;
use rnic_driver::cq::{CompChannel, Cq};
use rnic_driver::mr::Mr;
use rnic_driver::pd::Pd;
use rnic_driver::qp::*;
use rnic_driver::srq::Srq;
use rnic_driver::wr::*;
use rnic_emulator::RunMode;
use std::sync::Arc;

#[test]
fn every_object_in_any_order() {
    for mode in MODES {
        log_warnings();
        let fx = open(mode);
        // Round 0 is a warm-up: the command queue's mailbox pool grows to what these
        // commands need and stays (until the HCA closes).
        let mut base_maps = 0;
        for round in 0..5 {
            let order = round.max(1) - 1;
            let before = fx.dev.dma_mappings();
            let pd2 = Arc::new(Pd::alloc(&fx.hca).unwrap());
            let dpd = Arc::new(Pd::default_of(&fx.hca));
            assert_eq!(dpd.pdn(), fx.hca.pd());
            let chan = Arc::new(CompChannel::create(&fx.hca, 2).unwrap());
            let cq1 = Arc::new(Cq::create(&fx.hca, 100, Some(&chan)).unwrap());
            assert_eq!(cq1.capacity(), 128);
            let cq2 = fx.cq(16);
            let mr = Mr::alloc(&pd2, 3 * 4096 + 5, Access::ALL).unwrap();
            let mut raw = vec![0u8; 10_000];
            // SAFETY: `raw` outlives the region (dropped below, before `raw`).
            let mr2 = unsafe {
                Mr::register_raw(&dpd, raw.as_mut_ptr().add(3), 9000, Access::LOCAL_WRITE)
            }
            .unwrap();
            assert_eq!(mr2.addr(), raw.as_ptr() as u64 + 3);
            assert_ne!(mr.lkey() & 0xFF, mr2.lkey() & 0xFF, "variant bytes rotate");
            let srq = Arc::new(Srq::create(&pd2, 16, 1).unwrap());
            let mut cfg = QpConfig::new(QpType::Rc, cq1.clone(), cq2.clone());
            let qp_rc = Qp::create(&pd2, &cfg).unwrap();
            cfg.qp_type = QpType::Uc;
            let qp_uc = Qp::create(&dpd, &cfg).unwrap();
            cfg.qp_type = QpType::Ud;
            cfg.srq = Some(srq.clone());
            let qp_ud = Qp::create(&pd2, &cfg).unwrap();
            drop(cfg);
            let ah = AddressHandle::new(&pd2, &fx.self_av()).unwrap();
            assert!(
                fx.dev.dma_mappings() >= before + 9,
                "9 objects hold DMA memory"
            );
            // Drop the handles in different orders: dependents keep dependencies alive.
            match order {
                0 => {
                    drop((pd2, dpd, chan, cq1, cq2, srq));
                    drop((mr, mr2, ah));
                    drop((qp_ud, qp_uc, qp_rc));
                }
                1 => {
                    qp_rc.destroy().unwrap();
                    qp_uc.destroy().unwrap();
                    qp_ud.destroy().unwrap();
                    Arc::try_unwrap(srq).unwrap().destroy().unwrap();
                    Arc::try_unwrap(cq1).unwrap().destroy().unwrap();
                    Arc::try_unwrap(cq2).unwrap().destroy().unwrap();
                    drop(chan);
                    mr.destroy().unwrap();
                    mr2.destroy().unwrap();
                    drop(ah);
                    Arc::try_unwrap(pd2).unwrap().destroy().unwrap();
                    Arc::try_unwrap(dpd).unwrap().destroy().unwrap();
                }
                2 => {
                    drop((cq2, cq1, qp_uc, srq, mr2, pd2));
                    drop((qp_rc, chan, ah, mr, dpd));
                    drop(qp_ud);
                }
                _ => {
                    drop((ah, qp_ud, srq, dpd, mr2));
                    drop((cq1, chan, qp_rc, pd2, mr));
                    drop((qp_uc, cq2));
                }
            }
            drop(raw);
            if round == 0 {
                base_maps = fx.dev.dma_mappings();
            }
            assert!(before <= base_maps);
            assert_eq!(fx.dev.dma_mappings(), base_maps, "{mode:?} order {order}");
        }
        let Fx { dev, hca, pd, .. } = fx;
        drop(pd);
        Arc::try_unwrap(hca).unwrap().close().unwrap();
        assert_eq!(dev.pages_held(), 0);
        assert_eq!(dev.dma_mappings(), 0);
    }
}

#[test]
fn transitions_carry_attributes_and_name_the_wrong_one() {
    let fx = open(RunMode::Deterministic);
    let cq = fx.cq(16);
    let qp = Qp::create(&fx.pd, &QpConfig::new(QpType::Rc, cq.clone(), cq.clone())).unwrap();
    assert_eq!(qp.query().unwrap().state, QpState::Rst);
    let attr_of = |e: DriverError| match e {
        DriverError::QpAttr {
            attr, transition, ..
        } => (transition, attr),
        other => panic!("expected an attribute error, got {other}"),
    };
    assert_eq!(
        attr_of(
            qp.to_init(&InitAttr {
                port_num: 2,
                ..InitAttr::default()
            })
            .unwrap_err()
        ),
        ("RST2INIT", "port_num")
    );
    qp.to_init(&InitAttr {
        access: Access::REMOTE_READ | Access::REMOTE_ATOMIC,
        pkey_index: 0,
        ..InitAttr::default()
    })
    .unwrap();
    let info = qp.query().unwrap();
    assert_eq!(info.state, QpState::Init);
    assert!(info.qpc.rre() && info.qpc.rae() && !info.qpc.rwe());
    let full = RtrAttr {
        path_mtu: Some(Mtu::Mtu2048),
        dest_qpn: Some(qp.qpn()),
        rq_psn: 0xABCDE,
        av: Some(AddressVector {
            traffic_class: 0x68,
            flow_label: 0x12345,
            hop_limit: 7,
            sl: 3,
            ..fx.self_av()
        }),
        max_dest_rd_atomic: 4,
        min_rnr_timer: 12,
    };
    for (bad, attr) in [
        (
            RtrAttr {
                path_mtu: None,
                ..full
            },
            "path_mtu",
        ),
        (
            RtrAttr {
                dest_qpn: None,
                ..full
            },
            "dest_qp_num",
        ),
        (RtrAttr { av: None, ..full }, "ah_attr"),
        (
            RtrAttr {
                rq_psn: 1 << 24,
                ..full
            },
            "rq_psn",
        ),
        (
            RtrAttr {
                min_rnr_timer: 32,
                ..full
            },
            "min_rnr_timer",
        ),
        (
            RtrAttr {
                max_dest_rd_atomic: 200,
                ..full
            },
            "max_dest_rd_atomic",
        ),
        (
            RtrAttr {
                av: Some(AddressVector {
                    sgid_index: 9,
                    ..fx.self_av()
                }),
                ..full
            },
            "ah_attr.grh.sgid_index",
        ),
    ] {
        let e = qp.to_rtr(&bad).unwrap_err();
        assert!(e.to_string().contains(attr), "{e}");
        assert_eq!(attr_of(e), ("INIT2RTR", attr));
    }
    qp.to_rtr(&full).unwrap();
    let q = qp.query().unwrap().qpc;
    assert_eq!(q.state(), QpState::Rtr as u8);
    assert_eq!(
        (q.mtu(), q.remote_qpn(), q.next_rcv_psn()),
        (4, qp.qpn(), 0xABCDE)
    );
    assert_eq!((q.log_rra_max(), q.min_rnr_nak()), (2, 12));
    let p = q.primary_address_path();
    assert_eq!(p.rgid_rip(), fx.self_av().dgid);
    assert_eq!(p.rmac(), fx.hca.mac());
    assert_eq!(
        (p.src_addr_index(), p.hop_limit(), p.sl(), p.flow_label()),
        (1, 7, 3, 0x12345)
    );
    assert_eq!((p.dscp(), p.ecn(), p.tclass()), (0x1A, 0, 0x68));
    assert_eq!(
        p.udp_sport(),
        rnic_driver::ah::rdma_get_udp_sport(0x12345, qp.qpn(), qp.qpn()),
        "rxe's source port formula"
    );
    let rts = RtsAttr {
        sq_psn: 0x55,
        timeout: 14,
        retry_cnt: 6,
        rnr_retry: 5,
        max_rd_atomic: 2,
    };
    for (bad, attr) in [
        (RtsAttr { timeout: 32, ..rts }, "timeout"),
        (
            RtsAttr {
                retry_cnt: 8,
                ..rts
            },
            "retry_cnt",
        ),
        (
            RtsAttr {
                rnr_retry: 8,
                ..rts
            },
            "rnr_retry",
        ),
        (
            RtsAttr {
                sq_psn: 1 << 24,
                ..rts
            },
            "sq_psn",
        ),
    ] {
        assert_eq!(attr_of(qp.to_rts(&bad).unwrap_err()), ("RTR2RTS", attr));
    }
    qp.to_rts(&rts).unwrap();
    let q = qp.query().unwrap().qpc;
    assert_eq!(q.state(), QpState::Rts as u8);
    assert_eq!(
        (
            q.next_send_psn(),
            q.retry_count(),
            q.rnr_retry(),
            q.log_sra_max()
        ),
        (0x55, 6, 5, 1)
    );
    assert_eq!(q.primary_address_path().ack_timeout(), 14);
    qp.modify_rts(&Rts2RtsAttr {
        access: Some(Access::REMOTE_WRITE),
        min_rnr_timer: Some(3),
        retry_cnt: Some(2),
        ..Rts2RtsAttr::default()
    })
    .unwrap();
    let q = qp.query().unwrap().qpc;
    assert!(q.rwe() && !q.rre() && !q.rae());
    assert_eq!((q.min_rnr_nak(), q.retry_count()), (3, 2));
    // A transition from the wrong state is the device's BAD_QP_STATE.
    let e = qp.to_rtr(&full).unwrap_err();
    assert_eq!(
        e.cmd_status(),
        Some(rnic_hw_regs::status::CmdStatus::BadQpState),
        "{e}"
    );
    qp.to_err().unwrap();
    assert_eq!(qp.query().unwrap().state, QpState::Err);
    qp.to_reset().unwrap();
    assert_eq!(qp.query().unwrap().state, QpState::Rst);
    // UD needs a Q_Key.
    let ud = Qp::create(&fx.pd, &QpConfig::new(QpType::Ud, cq.clone(), cq.clone())).unwrap();
    assert_eq!(
        attr_of(ud.to_init(&InitAttr::default()).unwrap_err()),
        ("RST2INIT", "qkey")
    );
    ud.to_init(&InitAttr {
        qkey: Some(7),
        ..InitAttr::default()
    })
    .unwrap();
    assert_eq!(ud.query().unwrap().qpc.q_key(), 7);
}

#[test]
fn error_completions_for_bad_keys_bounds_and_access() {
    for mode in MODES {
        let fx = open(mode);
        let mr = Mr::alloc(&fx.pd, 4096, Access::ALL).unwrap();
        let ro = Mr::alloc(&fx.pd, 4096, Access::LOCAL_WRITE | Access::REMOTE_READ).unwrap();
        let sgl = [mr.sge(0, 16)];
        type Case = (&'static str, SendOp, Option<Sge>, WcStatus);
        let cases: [Case; 5] = [
            (
                "bad lkey",
                SendOp::Write {
                    raddr: mr.addr(),
                    rkey: mr.rkey(),
                },
                Some(Sge {
                    lkey: mr.lkey() ^ 0x100,
                    ..mr.sge(0, 16)
                }),
                WcStatus::LocProtErr,
            ),
            (
                "bad rkey",
                SendOp::Write {
                    raddr: mr.addr(),
                    rkey: mr.rkey() ^ 0x100,
                },
                None,
                WcStatus::RemAccessErr,
            ),
            (
                "remote bounds",
                SendOp::Write {
                    raddr: mr.addr() + 4090,
                    rkey: mr.rkey(),
                },
                None,
                WcStatus::RemAccessErr,
            ),
            (
                "remote access",
                SendOp::Write {
                    raddr: ro.addr(),
                    rkey: ro.rkey(),
                },
                None,
                WcStatus::RemAccessErr,
            ),
            (
                "local bounds",
                SendOp::Write {
                    raddr: mr.addr(),
                    rkey: mr.rkey(),
                },
                Some(mr.sge(4090, 16)),
                WcStatus::LocProtErr,
            ),
        ];
        for (what, op, sge, status) in cases {
            let (a, b, ca, cb) = fx.pair(QpType::Rc, Mtu::Mtu1024);
            let list = [sge.unwrap_or(sgl[0])];
            a.post_send(&[
                send_wr(1, op, &list, SendFlags::NONE),
                send_wr(2, SendOp::Send, &sgl, SendFlags::SIGNALED),
            ])
            .unwrap();
            let c = poll_n(&ca, 2);
            assert_eq!(
                (c[0].wr_id, c[0].status),
                (1, status),
                "{mode:?} {what}: {c:?}"
            );
            assert_ne!(c[0].vendor_err, 0xF9);
            assert_eq!(
                (c[1].wr_id, c[1].status),
                (2, WcStatus::WrFlushErr),
                "{what}: rest flushed"
            );
            assert_eq!(c[1].vendor_err, 0xF9);
            assert_eq!(a.query().unwrap().state, QpState::Err);
            drop((a, b, ca, cb));
        }
        // A SEND longer than the receive buffer: local length error at the responder.
        let (a, b, ca, cb) = fx.pair(QpType::Rc, Mtu::Mtu1024);
        b.post_recv(&[RecvWr {
            wr_id: 5,
            sgl: &[mr.sge(0, 8)],
        }])
        .unwrap();
        a.post_send(&[send_wr(1, SendOp::Send, &sgl, SendFlags::SIGNALED)])
            .unwrap();
        let r = poll_one(&cb);
        assert_eq!(
            (r.wr_id, r.status, r.opcode),
            (5, WcStatus::LocLenErr, WcOpcode::Recv)
        );
        let c = poll_one(&ca);
        assert_eq!(c.status, WcStatus::RemInvReqErr);
    }
}

#[test]
fn qp_to_err_flushes_everything_outstanding() {
    for mode in MODES {
        let fx = open(mode);
        let (a, b, ca, cb) = fx.pair(QpType::Rc, Mtu::Mtu1024);
        let mr = Mr::alloc(&fx.pd, 4096, Access::ALL).unwrap();
        let recvs: Vec<RecvWr<'_>> = (0..5)
            .map(|i| RecvWr {
                wr_id: 10 + i,
                sgl: &[],
            })
            .collect();
        b.post_recv(&recvs).unwrap();
        b.to_err().unwrap();
        let r = poll_n(&cb, 5);
        assert!(
            r.iter()
                .all(|c| c.status == WcStatus::WrFlushErr && c.opcode == WcOpcode::Recv)
        );
        assert_eq!(
            r.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
            [10, 11, 12, 13, 14]
        );
        // Sends posted to a QP in ERR are flushed too, unsignaled ones included.
        a.to_err().unwrap();
        let sgl = [mr.sge(0, 8)];
        a.post_send(&[
            send_wr(1, SendOp::Send, &sgl, SendFlags::NONE),
            send_wr(2, SendOp::Send, &sgl, SendFlags::SIGNALED),
        ])
        .unwrap();
        let c = poll_n(&ca, 2);
        assert_eq!(
            c.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(),
            [(1, WcStatus::WrFlushErr), (2, WcStatus::WrFlushErr)]
        );
        assert_empty(&ca);
        // Reset and reconnect: the QP works again from empty queues.
        a.to_reset().unwrap();
        b.to_reset().unwrap();
        fx.connect(&a, b.qpn(), Mtu::Mtu1024);
        fx.connect(&b, a.qpn(), Mtu::Mtu1024);
        b.post_recv(&[RecvWr {
            wr_id: 42,
            sgl: &[mr.sge(0, 64)],
        }])
        .unwrap();
        a.post_send(&[send_wr(3, SendOp::Send, &sgl, SendFlags::SIGNALED)])
            .unwrap();
        assert_eq!(poll_one(&ca).status, WcStatus::Success);
        assert_eq!(poll_one(&cb).wr_id, 42);
    }
}

/// Resident set size in pages, from /proc/self/statm.
fn rss_pages() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

#[test]
fn ten_thousand_cycles_leak_nothing() {
    let fx = open(RunMode::Deterministic);
    let pages = fx.dev.pages_held();
    let maps = fx.dev.dma_mappings();
    let cycle = |i: usize| {
        let cq = fx.cq(64);
        let qp = Qp::create(&fx.pd, &QpConfig::new(QpType::Rc, cq.clone(), cq.clone())).unwrap();
        let mr = Mr::alloc(&fx.pd, 8192, Access::ALL).unwrap();
        if i % 3 == 0 {
            qp.destroy().unwrap();
            mr.destroy().unwrap();
            Arc::try_unwrap(cq).unwrap().destroy().unwrap();
        } else {
            drop((mr, qp, cq));
        }
    };
    for i in 0..500 {
        cycle(i);
    }
    let rss = rss_pages();
    for i in 0..10_000 {
        cycle(i);
    }
    assert_eq!(fx.dev.pages_held(), pages, "firmware pages");
    assert_eq!(fx.dev.dma_mappings(), maps, "IOVA mappings");
    let grown = rss_pages().saturating_sub(rss);
    assert!(grown < 256, "RSS grew by {grown} pages over 10,000 cycles");
    let c = fx.dev.counters();
    assert_eq!(c.command_errors, 0);
}

/// Sizes beyond anything a device offers are refused with `InvalidArgument`, never a panic
/// (an overflow in the size arithmetic), at every boundary of `u32`.
#[test]
fn absurd_queue_sizes_are_refused() {
    let fx = open(RunMode::Deterministic);
    let pd = Arc::new(Pd::alloc(&fx.hca).unwrap());
    for n in [1 << 31, (1 << 31) + 1, u32::MAX - 1, u32::MAX] {
        let e = Cq::create(&fx.hca, n, None).unwrap_err();
        assert!(
            matches!(e, DriverError::InvalidArgument(_)),
            "CQ of {n}: {e}"
        );
        let e = Srq::create(&pd, n, 1).unwrap_err();
        assert!(
            matches!(e, DriverError::InvalidArgument(_)),
            "SRQ of {n}: {e}"
        );
        for caps in [
            QpCaps {
                max_send_wr: n,
                ..QpCaps::default()
            },
            QpCaps {
                max_recv_wr: n,
                ..QpCaps::default()
            },
        ] {
            let mut cfg = QpConfig::new(QpType::Rc, fx.cq(16), fx.cq(16));
            cfg.caps = caps;
            let e = Qp::create(&pd, &cfg).unwrap_err();
            assert!(
                matches!(e, DriverError::InvalidArgument(_)),
                "QP {caps:?}: {e}"
            );
        }
    }
}

/// A region longer than the device's `log_max_mrw_sz` allows is refused with the limit,
/// before anything is allocated, mapped or sent (it used to allocate and map it all, then
/// fail CREATE_MKEY with INPUT_LEN_ERR).
#[test]
fn regions_beyond_max_mr_size_are_refused_up_front() {
    let fx = open(RunMode::Deterministic);
    let max = fx.hca.max_mr_size();
    assert_eq!(
        max,
        1u64 << fx.hca.caps().general.log_max_mrw_sz(),
        "one definition of the limit"
    );
    assert!(max < u64::MAX, "the emulated device has a real limit");
    let maps = fx.dev.dma_mappings();
    let commands = fx.dev.counters().commands;
    for len in [max + 1, max + 4096, 16 << 30] {
        let e = Mr::alloc(&fx.pd, len as usize, Access::LOCAL_WRITE).unwrap_err();
        match e {
            DriverError::LimitExceeded {
                requested, max: m, ..
            } => assert_eq!((requested, m), (len, max)),
            other => panic!("{len}: {other}"),
        }
    }
    assert_eq!(fx.dev.dma_mappings(), maps, "nothing was mapped");
    assert_eq!(fx.dev.counters().commands, commands, "nothing was sent");
    // Up to the limit registration goes on as before.
    assert!(Mr::alloc(&fx.pd, 1 << 20, Access::LOCAL_WRITE).is_ok());
}

#[test]
fn uc_refuses_remote_read_and_atomic() {
    // The driver is the one layer that checks QP attributes: UC has no READ or atomic
    // packets, so RST2INIT refuses either access right and leaves the QP in RST.
    let fx = open(RunMode::Deterministic);
    let cq = fx.cq(16);
    let qp = Qp::create(&fx.pd, &QpConfig::new(QpType::Uc, cq.clone(), cq.clone())).unwrap();
    for access in [Access::REMOTE_READ, Access::REMOTE_ATOMIC] {
        let e = qp
            .to_init(&InitAttr {
                access: access | Access::REMOTE_WRITE,
                ..InitAttr::default()
            })
            .unwrap_err();
        assert!(
            matches!(
                e,
                DriverError::QpAttr {
                    transition: "RST2INIT",
                    attr: "qp_access_flags",
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(qp.query().unwrap().state, QpState::Rst);
    }
    qp.to_init(&InitAttr {
        access: Access::REMOTE_WRITE,
        ..InitAttr::default()
    })
    .unwrap();
}
