//! CM MADs: the input (cut or zero-padded to 256 bytes; shorter inputs are also given as
//! they are, which must fail as `Short`) into `rnic_cm::wire`'s `Mad::parse` and every CM
//! message's `parse` (REQ, MRA, REJ, REP, RTU, DREQ, DREP, SIDR REQ, SIDR REP), and a REQ's
//! private data into rdma_cm's `IpHeader::parse`.
//!
//! What parses re-emits: the MAD header emitted and parsed again is the same `Mad`; a
//! message emitted (in the input's transaction) parses to the same `Repr`, its header the
//! same attribute and transaction as a Send, and emit is deterministic; exactly the message
//! the attribute names parses; `Rej::ari` and `IpHeader` agree with their length fields.
//! Bytes a `Repr` does not keep (reserved bits, method and status of a message) are not
//! compared with the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rnic_cm::wire::ip::IpHeader;
use rnic_cm::wire::{
    Drep, Dreq, MAD_LEN, Mad, Method, Mra, Rej, Rep, Req, Rtu, SidrRep, SidrReq, WireError,
};

/// Parses `mad` as `M`; when it parses, emits it in transaction `tid` and checks that the
/// emitted MAD parses to the same `Repr` and is a Send of `M`'s attribute. Returns whether
/// it parsed.
fn round_trip<M: PartialEq + core::fmt::Debug>(
    mad: &[u8],
    tid: u64,
    attr: u16,
    parse: fn(&[u8]) -> Result<M, WireError>,
    emit: fn(&M, u64, &mut [u8; MAD_LEN]),
) -> bool {
    let Ok(m) = parse(mad) else {
        return false;
    };
    let mut out = [0xA5u8; MAD_LEN];
    emit(&m, tid, &mut out);
    let mut again = [0x5Au8; MAD_LEN];
    emit(&m, tid, &mut again);
    assert_eq!(
        out, again,
        "emit is deterministic (whatever the buffer held)"
    );
    assert_eq!(parse(&out).as_ref(), Ok(&m), "emit then parse: {m:?}");
    let h = Mad::parse(&out).expect("an emitted message is a CM MAD");
    assert_eq!(
        (h.method, h.status, h.attr_id, h.transaction_id, h.attr_mod),
        (Method::Send, 0, attr, tid, 0)
    );
    true
}

fuzz_target!(|data: &[u8]| {
    if data.len() < MAD_LEN {
        assert_eq!(Mad::parse(data), Err(WireError::Short { len: data.len() }));
        assert!(Req::parse(data).is_err() && Rej::parse(data).is_err());
    }
    let mut mad = [0u8; MAD_LEN];
    let n = data.len().min(MAD_LEN);
    mad[..n].copy_from_slice(&data[..n]);
    let Ok(h) = Mad::parse(&mad) else {
        // No message parses what is not a CM MAD.
        assert!(Rtu::parse(&mad).is_err() && Req::parse(&mad).is_err());
        return;
    };
    let mut hb = mad;
    h.emit(&mut hb);
    assert_eq!(Mad::parse(&hb), Ok(h), "header emit then parse");
    assert_eq!(
        hb[24..],
        mad[24..],
        "the header's emit writes only the header"
    );

    let tid = h.transaction_id;
    let attr = h.attr_id;
    let parsed = [
        round_trip(&mad, tid, Req::ATTR_ID, Req::parse, Req::emit),
        round_trip(&mad, tid, Mra::ATTR_ID, Mra::parse, Mra::emit),
        round_trip(&mad, tid, Rej::ATTR_ID, Rej::parse, Rej::emit),
        round_trip(&mad, tid, Rep::ATTR_ID, Rep::parse, Rep::emit),
        round_trip(&mad, tid, Rtu::ATTR_ID, Rtu::parse, Rtu::emit),
        round_trip(&mad, tid, Dreq::ATTR_ID, Dreq::parse, Dreq::emit),
        round_trip(&mad, tid, Drep::ATTR_ID, Drep::parse, Drep::emit),
        round_trip(&mad, tid, SidrReq::ATTR_ID, SidrReq::parse, SidrReq::emit),
        round_trip(&mad, tid, SidrRep::ATTR_ID, SidrRep::parse, SidrRep::emit),
    ];
    let attrs = [
        Req::ATTR_ID,
        Mra::ATTR_ID,
        Rej::ATTR_ID,
        Rep::ATTR_ID,
        Rtu::ATTR_ID,
        Dreq::ATTR_ID,
        Drep::ATTR_ID,
        SidrReq::ATTR_ID,
        SidrRep::ATTR_ID,
    ];
    for (ok, a) in parsed.iter().zip(attrs) {
        assert_eq!(
            *ok,
            a == attr,
            "attribute {attr:#06x}: only its message parses"
        );
    }

    if let Ok(req) = Req::parse(&mad) {
        if let Ok(ip) = IpHeader::parse(&req.private_data) {
            let mut pd = [0u8; Req::PRIVATE_DATA_LEN];
            ip.emit(&mut pd)
                .expect("a parsed header's addresses are one family");
            assert_eq!(IpHeader::parse(&pd), Ok(ip));
        }
    }
    if let Ok(rej) = Rej::parse(&mad) {
        match rej.ari() {
            Ok(ari) => assert_eq!(ari.len(), usize::from(rej.rejected_info_length)),
            Err(_) => assert!(usize::from(rej.rejected_info_length) > rej.ari.len()),
        }
    }
});
