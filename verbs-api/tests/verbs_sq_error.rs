//! The send queue error state through the verbs: a UD send beyond the port MTU completes
//! with `LocLenErr` and puts the QP in SQE (not ERR): later sends are flushed, receives keep
//! working, and SQE -> RTS resumes sending.

mod common;

use common::*;
use rnic_verbs::*;

#[test]
fn ud_send_beyond_the_mtu_moves_the_qp_to_sqe_not_err() {
    let (a, b) = pair(QpType::Ud);
    // Room for a datagram beyond the largest MTU (emu0/emu1's active MTU is 4096).
    let src = a.pd.reg_mr(8192, AccessFlags::LOCAL_WRITE).unwrap();
    src.write(0, &pattern(8192, 9)).unwrap();
    let rbuf = a.pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let dst = b.pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let ah_b =
        a.pd.create_ah(&AhAttr::new(b.ctx.query_gid(1, 1).unwrap(), 1))
            .unwrap();
    let ah_a =
        b.pd.create_ah(&AhAttr::new(a.ctx.query_gid(1, 1).unwrap(), 1))
            .unwrap();
    let mtu = a.ctx.query_port(1).unwrap().active_mtu.bytes();

    // A receive on A posted before the failure.
    let r = [rbuf.sge(0, 40 + 64).unwrap()];
    a.qp.post_recv(&[RecvWr::new(7, &r)]).unwrap();
    // One datagram a byte beyond the MTU, then one that fits, in one post.
    let big = [src.sge(0, mtu + 1).unwrap()];
    let small = [src.sge(0, 16).unwrap()];
    let to_b = |id, sgl| {
        SendWr::send(id, sgl)
            .ud(&ah_b, b.qp.qp_num(), DEFAULT_QKEY)
            .signaled()
    };
    a.qp.post_send(&[to_b(1, &big[..]), to_b(2, &small[..])])
        .unwrap();
    let wc = poll_n(&a.cq, 2);
    assert_eq!(
        (wc[0].wr_id(), wc[0].status()),
        (1, WcStatus::LocLenErr),
        "{wc:?}"
    );
    assert_eq!((wc[1].wr_id(), wc[1].status()), (2, WcStatus::WrFlushErr));
    assert_empty(&a.cq); // the receive was not flushed
    assert_eq!(a.qp.query().unwrap().qp_state, QpState::Sqe);

    // The receive side works on in SQE.
    let bsrc = b.pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    bsrc.write(0, &pattern(16, 9)).unwrap();
    let s = [bsrc.sge(0, 16).unwrap()];
    b.qp.post_send(&[SendWr::send(3, &s)
        .ud(&ah_a, a.qp.qp_num(), DEFAULT_QKEY)
        .signaled()])
        .unwrap();
    let w = poll_one(&b.cq);
    assert_eq!((w.wr_id(), w.status()), (3, WcStatus::Success));
    let w = poll_one(&a.cq);
    assert_eq!(
        (w.wr_id(), w.status(), w.byte_len()),
        (7, WcStatus::Success, 40 + 16)
    );
    assert_eq!(rbuf.to_vec(40, 16).unwrap(), pattern(16, 9));

    // SQE -> RTS: A sends again.
    a.qp.sqe_to_rts().unwrap();
    assert_eq!(a.qp.query().unwrap().qp_state, QpState::Rts);
    let d = [dst.sge(0, 40 + 64).unwrap()];
    b.qp.post_recv(&[RecvWr::new(8, &d)]).unwrap();
    a.qp.post_send(&[to_b(4, &small[..])]).unwrap();
    let w = poll_one(&a.cq);
    assert_eq!((w.wr_id(), w.status()), (4, WcStatus::Success));
    let w = poll_one(&b.cq);
    assert_eq!(
        (w.wr_id(), w.status(), w.byte_len()),
        (8, WcStatus::Success, 40 + 16)
    );
}
