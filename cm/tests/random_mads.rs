//! Random bytes into every CM parser: a typed error or a message, never a panic; a message
//! parsed from random bytes emits bytes that parse to the same message (reserved bits are
//! dropped, nothing else).

use proptest::prelude::*;
use rnic_cm::wire::ip::IpHeader;
use rnic_cm::wire::{
    CM_CLASS, CM_CLASS_VERSION, Drep, Dreq, MAD_LEN, Mad, Mra, Rej, Rep, Req, Rtu, SidrRep, SidrReq,
};

/// Parses `mad` as `$t`; when it parses, checks emit/parse gives it back.
macro_rules! round_trip {
    ($mad:expr, $($t:ty),*) => {$(
        if let Ok(m) = <$t>::parse($mad) {
            let mut b = [0u8; MAD_LEN];
            m.emit(Mad::parse($mad).unwrap().transaction_id, &mut b);
            prop_assert_eq!(<$t>::parse(&b), Ok(m));
        }
    )*};
}

proptest! {
    #[test]
    fn random_mads_parse_or_fail_cleanly(
        mut bytes in proptest::collection::vec(any::<u8>(), 0..300),
        attr in prop_oneof![Just(0x0010u16), Just(0x0011), Just(0x0012), Just(0x0013),
                            Just(0x0014), Just(0x0015), Just(0x0016), Just(0x0017),
                            Just(0x0018), any::<u16>()],
        valid_header in any::<bool>(),
    ) {
        if valid_header && bytes.len() >= 24 {
            bytes[0] = 1;
            bytes[1] = CM_CLASS;
            bytes[2] = CM_CLASS_VERSION;
            bytes[16..18].copy_from_slice(&attr.to_be_bytes());
        }
        let mad = bytes.as_slice();
        round_trip!(mad, Req, Rep, Rtu, Rej, Mra, Dreq, Drep, SidrReq, SidrRep);
        if let Ok(r) = Rej::parse(mad) {
            let _ = r.ari();
        }
        let _ = IpHeader::parse(mad);
    }
}
