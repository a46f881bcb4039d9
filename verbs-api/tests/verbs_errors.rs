//! Every error path returns a typed error naming the verb (and, for QP attributes, the
//! attribute); nothing panics.

mod common;

use common::*;
use rnic_verbs::*;

fn fresh(t: QpType) -> Side {
    side("emu0", t)
}

fn qp_attr(e: &Error) -> (&'static str, &'static str) {
    match e {
        Error::QpAttr {
            transition, attr, ..
        } => (*transition, *attr),
        other => panic!("expected QpAttr, got {other:?}: {other}"),
    }
}

/// The states of an `InvalidTransition` error: (from, to).
/// Unwraps the error of `r` and checks it names `(transition, attribute)` (see [`qp_attr`]).
#[track_caller]
fn refused_attr<T: std::fmt::Debug>(r: Result<T, Error>, named: (&str, &str)) -> Error {
    let e = r.unwrap_err();
    assert_eq!(qp_attr(&e), named);
    e
}

fn transition(e: &Error) -> (QpState, QpState) {
    match e {
        Error::InvalidTransition { from, to, .. } => (*from, *to),
        other => panic!("expected InvalidTransition, got {other:?}: {other}"),
    }
}

/// The verb of an `InvalidArgument` error.
fn invalid_argument(e: &Error) -> &'static str {
    match e {
        Error::InvalidArgument { verb, .. } => verb,
        other => panic!("expected InvalidArgument, got {other:?}: {other}"),
    }
}

/// The destroy verb of an `InUse` error.
fn in_use(e: &Error) -> &'static str {
    match e {
        Error::InUse { verb, .. } => verb,
        other => panic!("expected InUse, got {other:?}: {other}"),
    }
}

#[test]
fn device_names_and_options() {
    for bad in [
        "",
        "emu2",
        "emu:",
        "emu:300.1.1.1",
        "emu:224.0.0.1",
        "mlx5_x",
        "eth0",
        "0000:3b:00",
    ] {
        let e = Context::open(bad).unwrap_err();
        assert!(matches!(e, Error::NoSuchDevice { .. }), "{bad}: {e}");
        assert!(e.to_string().starts_with("ibv_open_device"), "{e}");
    }
    // Options on a device that is already open are refused, not ignored.
    let _open = Context::open("emu0").unwrap();
    let opts = OpenOptions {
        emu: EmuOptions::default().with_fault_spec("loss=0.1").unwrap(),
        ..OpenOptions::default()
    };
    let e = Context::open_with("emu0", &opts).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
    assert!(EmuOptions::default().with_fault_spec("bogus=1").is_err());
    let ctx = Context::open("emu0").unwrap();
    assert!(matches!(
        ctx.query_port(2),
        Err(Error::InvalidArgument {
            verb: "ibv_query_port",
            ..
        })
    ));
    assert!(matches!(
        ctx.query_gid(1, 77),
        Err(Error::InvalidArgument {
            verb: "ibv_query_gid",
            ..
        })
    ));
    assert!(ctx.create_cq(0, None).is_err());
    assert!(matches!(
        ctx.create_cq(u32::MAX, None),
        Err(Error::InvalidArgument {
            verb: "ibv_create_cq",
            ..
        })
    ));
}

#[test]
fn missing_and_bad_attributes_are_named() {
    let a = fresh(QpType::Rc);
    let peer = Context::open("emu1").unwrap().query_gid(1, 1).unwrap();
    // RC RTR without path_mtu / dest_qp_num / ah_attr.
    a.qp.to_init(&InitAttr::default()).unwrap();
    let base = RtrAttr {
        path_mtu: Some(Mtu::Mtu1024),
        dest_qp_num: Some(0x99),
        ah_attr: Some(AhAttr::new(peer, 1)),
        ..RtrAttr::default()
    };
    let e = refused_attr(
        a.qp.to_rtr(&RtrAttr {
            path_mtu: None,
            ..base
        }),
        ("INIT2RTR", "path_mtu"),
    );
    assert!(e.to_string().contains("attribute path_mtu"), "{e}");
    refused_attr(
        a.qp.to_rtr(&RtrAttr {
            dest_qp_num: None,
            ..base
        }),
        ("INIT2RTR", "dest_qp_num"),
    );
    refused_attr(
        a.qp.to_rtr(&RtrAttr {
            ah_attr: None,
            ..base
        }),
        ("INIT2RTR", "ah_attr"),
    );
    refused_attr(
        a.qp.to_rtr(&RtrAttr {
            rq_psn: 1 << 24,
            ..base
        }),
        ("INIT2RTR", "rq_psn"),
    );
    refused_attr(
        a.qp.to_rtr(&RtrAttr {
            min_rnr_timer: 32,
            ..base
        }),
        ("INIT2RTR", "min_rnr_timer"),
    );
    let bad_sgid = AhAttr::new(peer, 9);
    refused_attr(
        a.qp.to_rtr(&RtrAttr {
            ah_attr: Some(bad_sgid),
            ..base
        }),
        ("INIT2RTR", "ah_attr"),
    );
    assert_eq!(
        a.qp.state(),
        QpState::Init,
        "a refused transition changes nothing"
    );
    a.qp.to_rtr(&base).unwrap();
    refused_attr(
        a.qp.to_rts(&RtsAttr {
            retry_cnt: 8,
            ..RtsAttr::default()
        }),
        ("RTR2RTS", "retry_cnt"),
    );
    refused_attr(
        a.qp.to_rts(&RtsAttr {
            timeout: 32,
            ..RtsAttr::default()
        }),
        ("RTR2RTS", "timeout"),
    );
    refused_attr(
        a.qp.to_rts(&RtsAttr {
            sq_psn: 1 << 24,
            ..RtsAttr::default()
        }),
        ("RTR2RTS", "sq_psn"),
    );
    a.qp.to_rts(&RtsAttr::default()).unwrap();
    refused_attr(
        a.qp.modify_rts(&RtsModifyAttr {
            rnr_retry: Some(9),
            ..RtsModifyAttr::default()
        }),
        ("RTS2RTS", "rnr_retry"),
    );

    // UD needs a Q_Key; UC takes no REMOTE_READ or atomics; port 1 only.
    let u = fresh(QpType::Ud);
    refused_attr(u.qp.to_init(&InitAttr::default()), ("RST2INIT", "qkey"));
    refused_attr(
        u.qp.to_init(&InitAttr {
            port_num: 2,
            qkey: Some(1),
            ..InitAttr::default()
        }),
        ("RST2INIT", "port_num"),
    );
    let c = fresh(QpType::Uc);
    refused_attr(
        c.qp.to_init(&InitAttr {
            access: AccessFlags::REMOTE_READ,
            ..InitAttr::default()
        }),
        ("RST2INIT", "qp_access_flags"),
    );
    refused_attr(
        c.qp.to_init(&InitAttr {
            access: AccessFlags::REMOTE_ATOMIC,
            ..InitAttr::default()
        }),
        ("RST2INIT", "qp_access_flags"),
    );
}

#[test]
fn wrong_transitions() {
    let a = fresh(QpType::Rc);
    let e = a.qp.to_rtr(&RtrAttr::default()).unwrap_err();
    assert_eq!(transition(&e), (QpState::Reset, QpState::Rtr));
    let e = a.qp.to_rts(&RtsAttr::default()).unwrap_err();
    assert_eq!(transition(&e), (QpState::Reset, QpState::Rts));
    let e = a.qp.modify_rts(&RtsModifyAttr::default()).unwrap_err();
    assert!(matches!(e, Error::InvalidTransition { .. }), "{e}");
    a.qp.to_init(&InitAttr::default()).unwrap();
    let e = a.qp.to_init(&InitAttr::default()).unwrap_err();
    assert_eq!(transition(&e), (QpState::Init, QpState::Init));
    let e = a.qp.to_rts(&RtsAttr::default()).unwrap_err();
    assert_eq!(transition(&e), (QpState::Init, QpState::Rts));
    // ERR and RESET are reachable from anywhere.
    a.qp.to_error().unwrap();
    let e = a.qp.to_rtr(&RtrAttr::default()).unwrap_err();
    assert_eq!(transition(&e).0, QpState::Err);
    a.qp.reset().unwrap();
    a.qp.to_init(&InitAttr::default()).unwrap();
}

#[test]
fn posting_in_the_wrong_state() {
    let a = fresh(QpType::Rc);
    let mr = a.pd.reg_mr(64, AccessFlags::LOCAL_WRITE).unwrap();
    let s = [mr.sge(0, 8).unwrap()];
    let check = |e: Error, verb: &str, state: QpState| match e {
        Error::WrongQpState {
            verb: v, state: s, ..
        } => assert_eq!((v, s), (verb, state)),
        other => panic!("{other}"),
    };
    check(
        a.qp.post_send(&[SendWr::send(1, &s)]).unwrap_err(),
        "ibv_post_send",
        QpState::Reset,
    );
    check(
        a.qp.post_recv(&[RecvWr::new(1, &s)]).unwrap_err(),
        "ibv_post_recv",
        QpState::Reset,
    );
    a.qp.to_init(&InitAttr::default()).unwrap();
    a.qp.post_recv(&[RecvWr::new(1, &s)]).unwrap(); // receives are fine in INIT
    check(
        a.qp.post_send(&[SendWr::send(1, &s)]).unwrap_err(),
        "ibv_post_send",
        QpState::Init,
    );
    // In ERR both are accepted and flushed: posts_in_err_are_flushed_whoever_moved_the_qp_there.
}

/// Drains `s.qp` (in ERR): a signaled SEND and a receive posted now each complete with
/// WR_FLUSH_ERR, then a receive posted alone (no send doorbell after it); returns the
/// completions' (wr_id, status).
fn post_and_flush(s: &Side, sgl: &[Sge]) -> Vec<(u64, WcStatus)> {
    s.qp.post_send(&[SendWr::send(7, sgl).signaled()]).unwrap();
    s.qp.post_recv(&[RecvWr::new(8, sgl)]).unwrap();
    let mut got: Vec<(u64, WcStatus)> = poll_n(&s.cq, 2)
        .iter()
        .map(|w| (w.wr_id(), w.status()))
        .collect();
    got.sort_unstable_by_key(|g| g.0);
    s.qp.post_recv(&[RecvWr::new(9, sgl)]).unwrap();
    let w = poll_one(&s.cq);
    got.push((w.wr_id(), w.status()));
    assert_empty(&s.cq);
    got
}

#[test]
fn posts_in_err_are_flushed_whoever_moved_the_qp_there() {
    let flushed = vec![
        (7, WcStatus::WrFlushErr),
        (8, WcStatus::WrFlushErr),
        (9, WcStatus::WrFlushErr),
    ];
    // The user moved it: to_error().
    let (a, _b) = pair(QpType::Rc);
    let mr = a.pd.reg_mr(64, AccessFlags::LOCAL_WRITE).unwrap();
    let s = [mr.sge(0, 8).unwrap()];
    a.qp.to_error().unwrap();
    assert_eq!(post_and_flush(&a, &s), flushed);
    // The device moved it: a WRITE the responder refuses (REM_ACCESS_ERR) puts the
    // requester in ERR while this handle still says RTS.
    let (c, d) = pair(QpType::Rc);
    let ro = d.pd.reg_mr(64, AccessFlags::LOCAL_WRITE).unwrap();
    c.qp.post_send(&[SendWr::write(2, &[], ro.remote(0)).inline(b"no").signaled()])
        .unwrap();
    assert_eq!(poll_one(&c.cq).status(), WcStatus::RemAccessErr);
    assert_eq!(c.qp.state(), QpState::Rts);
    let mr = c.pd.reg_mr(64, AccessFlags::LOCAL_WRITE).unwrap();
    let s = [mr.sge(0, 8).unwrap()];
    assert_eq!(post_and_flush(&c, &s), flushed);
    assert_eq!(c.qp.query().unwrap().qp_state, QpState::Err);
    // RESET still refuses both.
    a.qp.reset().unwrap();
    assert!(matches!(
        a.qp.post_send(&[SendWr::send(1, &s)]),
        Err(Error::WrongQpState { .. })
    ));
    assert!(matches!(
        a.qp.post_recv(&[RecvWr::new(1, &s)]),
        Err(Error::WrongQpState { .. })
    ));
}

#[test]
fn bad_work_requests() {
    let (a, b) = pair(QpType::Rc);
    let mr = a.pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let one = mr.sge(0, 8).unwrap();
    let many = [one; 5];
    let post_err = |r: Result<()>| match r {
        Err(Error::Post {
            index, kind, verb, ..
        }) => (verb, index, kind),
        other => panic!("{other:?}"),
    };
    // Too many SGEs (the QP has 4), at index 1: index 0 was posted.
    let (verb, index, kind) = post_err(a.qp.post_send(&[
        SendWr::write(1, &[], b_remote(&b)).inline(b"ok").signaled(),
        SendWr::send(2, &many),
    ]));
    assert_eq!((verb, index), ("ibv_post_send", 1));
    assert_eq!(kind, PostErrorKind::TooManySges { given: 5, max: 4 });
    assert_eq!(poll_one(&a.cq).wr_id(), 1);
    // Oversize inline.
    let big = [0u8; 65];
    let (_, _, kind) = post_err(a.qp.post_send(&[SendWr::send(3, &[]).inline(&big)]));
    assert_eq!(kind, PostErrorKind::InlineTooLong { given: 65, max: 64 });
    // Inline READ, atomics without 8 bytes.
    let (_, _, kind) = post_err(a.qp.post_send(&[SendWr::read(4, &[], b_remote(&b)).inline(b"x")]));
    assert_eq!(kind, PostErrorKind::InlineNotAllowed);
    let four = mr.sge(0, 4).unwrap();
    let (_, _, kind) = post_err(a.qp.post_send(&[SendWr::fetch_add(5, &four, b_remote(&b), 1)]));
    assert_eq!(kind, PostErrorKind::AtomicNeeds8Bytes);
    // Too many receive SGEs.
    let (verb, _, kind) = post_err(b.qp.post_recv(&[RecvWr::new(1, &many)]));
    assert_eq!(verb, "ibv_post_recv");
    assert!(matches!(kind, PostErrorKind::TooManySges { .. }));

    // Operations a QP type does not have.
    let (u, _v) = pair(QpType::Uc);
    let (_, _, kind) = post_err(u.qp.post_send(&[SendWr::read(1, &[one], b_remote(&b))]));
    assert_eq!(kind, PostErrorKind::OpNotSupported);
    let (d, _e) = pair(QpType::Ud);
    let (_, _, kind) = post_err(d.qp.post_send(&[SendWr::write(1, &[one], b_remote(&b))]));
    assert_eq!(kind, PostErrorKind::OpNotSupported);
    let (_, _, kind) = post_err(d.qp.post_send(&[SendWr::send(1, &[one])]));
    assert_eq!(kind, PostErrorKind::MissingUdDest);
}

fn b_remote(b: &Side) -> RemoteAddr {
    RemoteAddr {
        addr: 0x1000,
        rkey: b.qp.qp_num(),
    }
}

#[test]
fn queue_full() {
    let a = side_with("emu0", QpType::Rc, |b| b.max_send_wr(4).max_recv_wr(4));
    let b = side("emu1", QpType::Rc);
    // Connected, but B posts no receives: SENDs wait in RNR retries and fill A's queue.
    connect_pair(&a.qp, &b.qp, &ConnectOptions::default()).unwrap();
    // max_send_wr counts the largest WQE; small inline SENDs take one 64-byte block each,
    // yet no more than max_send_wr of them are taken.
    let cap = a.qp.cap().max_send_wr as usize;
    let wrs: Vec<SendWr<'_>> = (0..cap as u64 * 8 + 1)
        .map(|i| SendWr::send(i, &[]).inline(b"z"))
        .collect();
    match a.qp.post_send(&wrs) {
        Err(Error::Post {
            index,
            kind: PostErrorKind::QueueFull,
            ..
        }) => assert_eq!(index, cap),
        other => panic!("{other:?}"),
    }
    let mr = a.pd.reg_mr(64, AccessFlags::LOCAL_WRITE).unwrap();
    let s = [mr.sge(0, 8).unwrap()];
    let rcap = a.qp.cap().max_recv_wr as usize;
    let rwrs: Vec<RecvWr<'_>> = (0..rcap as u64 + 1).map(|i| RecvWr::new(i, &s)).collect();
    match a.qp.post_recv(&rwrs) {
        Err(Error::Post {
            index,
            kind: PostErrorKind::QueueFull,
            ..
        }) => assert_eq!(index, rcap),
        other => panic!("{other:?}"),
    }
}

#[test]
fn protection_errors_complete_with_their_status() {
    let (a, b) = pair(QpType::Rc);
    let mr = a.pd.reg_mr(64, AccessFlags::LOCAL_WRITE).unwrap();
    // A bad lkey (a raw region deregistered before use): LOC_PROT_ERR.
    let mut raw = vec![0u8; 4096];
    // SAFETY: `raw` outlives the region, which is deregistered at once.
    let gone = unsafe {
        a.pd.reg_mr_raw(raw.as_mut_ptr(), raw.len(), AccessFlags::LOCAL_WRITE)
    }
    .unwrap();
    let stale = gone.sge(0, 16).unwrap();
    gone.dereg().unwrap();
    let dst = b.pd.reg_mr(64, rw()).unwrap();
    a.qp.post_send(&[SendWr::write(1, &[stale], dst.remote(0)).signaled()])
        .unwrap();
    let w = poll_one(&a.cq);
    assert_eq!(w.status(), WcStatus::LocProtErr, "{w:?}");
    assert_eq!(w.status().name(), "IBV_WC_LOC_PROT_ERR");
    drop(raw);

    // WRITE to a region without REMOTE_WRITE: REM_ACCESS_ERR.
    let (c, d) = pair(QpType::Rc);
    let ro = d.pd.reg_mr(64, AccessFlags::LOCAL_WRITE).unwrap();
    c.qp.post_send(&[SendWr::write(2, &[], ro.remote(0)).inline(b"no").signaled()])
        .unwrap();
    assert_eq!(poll_one(&c.cq).status(), WcStatus::RemAccessErr);
    let _ = mr;
}

#[test]
fn ownership_errors() {
    let a = fresh(QpType::Rc);
    // The CQ a QP uses cannot be destroyed; neither can the PD with a QP and region.
    let e = a.cq.clone().destroy().unwrap_err();
    assert_eq!(in_use(&e), "ibv_destroy_cq");
    let e = a.pd.clone().dealloc().unwrap_err();
    assert_eq!(in_use(&e), "ibv_dealloc_pd");
    let Side { ctx, pd, cq, qp } = a;
    // Dropping in any order is fine: the QP keeps its CQ and PD alive.
    drop(cq);
    drop(pd);
    qp.destroy().unwrap();
    // Once the last user is gone, destroy works.
    let cq = ctx.create_cq(8, None).unwrap();
    cq.destroy().unwrap();
    ctx.alloc_pd().unwrap().dealloc().unwrap();
    // Access rules of ibv_reg_mr.
    let pd = ctx.alloc_pd().unwrap();
    let e = pd.reg_mr(64, AccessFlags::REMOTE_WRITE).unwrap_err();
    assert_eq!(invalid_argument(&e), "ibv_reg_mr");
    assert!(pd.reg_mr(0, AccessFlags::LOCAL_WRITE).is_err());
    assert!(
        pd.reg_mr_from(Vec::new(), AccessFlags::LOCAL_WRITE)
            .is_err()
    );
    let mr = pd.reg_mr(100, AccessFlags::LOCAL_WRITE).unwrap();
    let mut out = [0u8; 10];
    assert!(matches!(
        mr.read(95, &mut out),
        Err(Error::OutOfBounds { .. })
    ));
    assert!(matches!(
        mr.write(usize::MAX, b"x"),
        Err(Error::OutOfBounds { .. })
    ));
    assert!(mr.sge(90, 11).is_err());
    // A CQ without a channel cannot be armed.
    let cq = ctx.create_cq(8, None).unwrap();
    assert!(matches!(
        cq.req_notify(false),
        Err(Error::InvalidArgument {
            verb: "ibv_req_notify_cq",
            ..
        })
    ));
    // Creation limits.
    let e = pd
        .create_qp(QpType::Rc, &cq, &cq)
        .max_send_wr(0)
        .build()
        .unwrap_err();
    assert_eq!(invalid_argument(&e), "ibv_create_qp");
    let e = pd
        .create_qp(QpType::Rc, &cq, &cq)
        .max_send_sge(1000)
        .build()
        .unwrap_err();
    assert_eq!(invalid_argument(&e), "ibv_create_qp");
    let too_many = ctx.query_device().max_qp_wr + 1;
    let e = pd
        .create_qp(QpType::Rc, &cq, &cq)
        .max_recv_wr(too_many)
        .build()
        .unwrap_err();
    assert_eq!(invalid_argument(&e), "ibv_create_qp");
    assert_eq!(
        invalid_argument(&pd.create_srq(0, 1).unwrap_err()),
        "ibv_create_srq"
    );
    // A CQ of another device.
    let other = Context::open("emu1").unwrap().create_cq(8, None).unwrap();
    assert!(pd.create_qp(QpType::Rc, &other, &cq).build().is_err());
}

#[test]
fn cq_overrun_is_reported_not_a_panic() {
    let a = side_with("emu0", QpType::Rc, |b| b.max_send_wr(64));
    let b = side("emu1", QpType::Rc);
    let small = a.ctx.create_cq(1, None).unwrap();
    let qp =
        a.pd.create_qp(QpType::Rc, &small, &small)
            .max_send_wr(16)
            .build()
            .unwrap();
    connect_pair(&qp, &b.qp, &ConnectOptions::default()).unwrap();
    let dst = b.pd.reg_mr(64, rw()).unwrap();
    let wrs: Vec<SendWr<'_>> = (0..8)
        .map(|i| SendWr::write(i, &[], dst.remote(0)).inline(b"o").signaled())
        .collect();
    qp.post_send(&wrs).unwrap();
    // The overrun is reported as IBV_EVENT_CQ_ERR naming the CQ.
    let deadline = std::time::Instant::now() + T;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match a.ctx.get_async_event(left).unwrap() {
            Some(AsyncEvent::CqErr { cqn, .. }) if cqn == small.cqn() => break,
            Some(_) => {} // other tests share emu0: their events pass by
            None => panic!("no IBV_EVENT_CQ_ERR for CQ {:#x}", small.cqn()),
        }
    }
    // More completions arrived than the CQ holds: polling returns at most what its ring
    // holds (one entry more than `capacity`, as mlx5 keeps one back), or a typed error; it
    // never panics.
    let mut wc = [WorkCompletion::default(); 16];
    let mut seen = 0;
    for _ in 0..4 {
        match small.poll(&mut wc) {
            Ok(n) => seen += n,
            Err(e) => {
                assert!(matches!(e, Error::Poll { .. }), "{e}");
                break;
            }
        }
    }
    let ring = small.capacity() as usize + 1;
    assert!(seen <= ring, "{seen} from a ring of {ring}");
}

#[test]
fn max_mr_size_is_the_devices_and_reg_mr_refuses_beyond_it() {
    let ctx = Context::open("emu0").unwrap();
    let max = ctx.query_device().max_mr_size;
    assert_eq!(max, 1 << 31, "the emulated device's log_max_mrw_sz");
    let pd = ctx.alloc_pd().unwrap();
    match pd.reg_mr(max as usize + 1, AccessFlags::LOCAL_WRITE) {
        Err(Error::Driver {
            verb: "ibv_reg_mr",
            source:
                rnic_driver::DriverError::LimitExceeded {
                    requested, max: m, ..
                },
        }) => assert_eq!((requested, m), (max + 1, max)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn pkey_index_beyond_the_ports_table_is_refused() {
    let a = fresh(QpType::Rc);
    let len = a.ctx.query_port(1).unwrap().pkey_tbl_len;
    assert_eq!(len, 1, "a RoCE port has the default P_Key only");
    for bad in [len, 1000, u16::MAX] {
        let e = refused_attr(
            a.qp.to_init(&InitAttr {
                pkey_index: bad,
                ..InitAttr::default()
            }),
            ("RST2INIT", "pkey_index"),
        );
        assert!(e.to_string().contains(&bad.to_string()), "{e}");
        assert_eq!(a.qp.query().unwrap().qp_state, QpState::Reset);
    }
    a.qp.to_init(&InitAttr::default()).unwrap();
}

#[test]
fn unknown_access_flag_bits_are_refused() {
    let a = fresh(QpType::Rc);
    for bits in [0x100, 1 << 20, 1 << 30] {
        let acc = AccessFlags::from_bits_retain(bits) | AccessFlags::LOCAL_WRITE;
        let e = a.pd.reg_mr(64, acc).unwrap_err();
        assert_eq!(invalid_argument(&e), "ibv_reg_mr");
        assert!(e.to_string().contains(&format!("{bits:#x}")), "{e}");
        let e = a.pd.reg_mr_from(vec![0; 64], acc).unwrap_err();
        assert_eq!(invalid_argument(&e), "ibv_reg_mr");
    }
    let mr = a.pd.reg_mr(64, AccessFlags::all()).unwrap();
    assert_eq!(mr.access(), AccessFlags::all());
}

#[test]
fn ud_sends_with_an_address_handle_of_another_pd_or_device_are_refused() {
    let u = side("emu0", QpType::Ud);
    u.qp.to_init(&InitAttr {
        qkey: Some(DEFAULT_QKEY),
        ..InitAttr::default()
    })
    .unwrap();
    u.qp.to_rtr(&RtrAttr::default()).unwrap();
    u.qp.to_rts(&RtsAttr::default()).unwrap();
    let gid = u.ctx.query_gid(1, 1).unwrap();
    let other_pd = u
        .ctx
        .alloc_pd()
        .unwrap()
        .create_ah(&AhAttr::new(gid, 1))
        .unwrap();
    let emu1 = Context::open("emu1").unwrap();
    let other_dev = emu1
        .alloc_pd()
        .unwrap()
        .create_ah(&AhAttr::new(emu1.query_gid(1, 1).unwrap(), 1))
        .unwrap();
    for ah in [&other_pd, &other_dev] {
        let wrs = [SendWr::send(1, &[])
            .inline(b"a")
            .ud(ah, u.qp.qp_num(), DEFAULT_QKEY)];
        match u.qp.post_send(&wrs) {
            Err(Error::Post {
                index: 0,
                kind: PostErrorKind::AhOtherPd,
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
    }
    assert_empty(&u.cq);
    // The QP's own PD's handle is fine.
    let own = u.pd.create_ah(&AhAttr::new(gid, 1)).unwrap();
    u.qp.post_send(&[SendWr::send(2, &[])
        .inline(b"b")
        .ud(&own, u.qp.qp_num(), DEFAULT_QKEY)
        .signaled()])
        .unwrap();
    assert_eq!(poll_one(&u.cq).wr_id(), 2);
}
