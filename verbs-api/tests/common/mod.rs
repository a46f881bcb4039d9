//! Shared helpers of the verbs tests.
#![allow(dead_code, unreachable_pub, missing_docs)]

use rnic_verbs::*;
use std::time::Duration;

pub const T: Duration = Duration::from_secs(20);

/// One side: context, PD, CQ (for both queues) and a QP.
pub struct Side {
    pub ctx: Context,
    pub pd: ProtectionDomain,
    pub cq: CompletionQueue,
    pub qp: QueuePair,
}

pub fn side(name: &str, t: QpType) -> Side {
    side_with(name, t, |b| b)
}

pub fn side_with(
    name: &str,
    t: QpType,
    f: impl FnOnce(QueuePairBuilder) -> QueuePairBuilder,
) -> Side {
    let ctx = Context::open(name).expect("open");
    let pd = ctx.alloc_pd().expect("alloc_pd");
    let cq = ctx.create_cq(256, None).expect("create_cq");
    let qp = f(pd.create_qp(t, &cq, &cq)).build().expect("create_qp");
    Side { ctx, pd, cq, qp }
}

/// A connected pair on emu0 / emu1.
pub fn pair(t: QpType) -> (Side, Side) {
    let a = side("emu0", t);
    let b = side("emu1", t);
    connect_pair(&a.qp, &b.qp, &ConnectOptions::default()).expect("connect_pair");
    (a, b)
}

pub fn poll_n(cq: &CompletionQueue, n: usize) -> Vec<WorkCompletion> {
    let mut wc = vec![WorkCompletion::default(); n];
    let got = cq.poll_blocking(&mut wc, T).expect("poll");
    assert_eq!(got, n, "completions: {:?}", &wc[..got]);
    wc
}

pub fn poll_one(cq: &CompletionQueue) -> WorkCompletion {
    poll_n(cq, 1)[0]
}

pub fn assert_empty(cq: &CompletionQueue) {
    let mut wc = [WorkCompletion::default(); 4];
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(cq.poll(&mut wc).unwrap(), 0, "unexpected {:?}", wc[0]);
}

pub fn rw() -> AccessFlags {
    AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE
}

pub fn all() -> AccessFlags {
    AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC
}

pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// `a` WRITEs `bytes` inline into a new region of `b` and checks they landed (connected RC).
pub fn write_inline_and_check(a: &Side, b: &Side, bytes: &[u8]) {
    let dst = b.pd.reg_mr(bytes.len().max(1), rw()).unwrap();
    a.qp.post_send(&[SendWr::write(1, &[], dst.remote(0))
        .inline(bytes)
        .signaled()])
        .unwrap();
    assert!(poll_one(&a.cq).is_success());
    assert_eq!(dst.to_vec(0, bytes.len()).unwrap(), bytes);
}
