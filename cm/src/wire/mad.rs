//! The MAD common header (IBTA Vol. 1, 13.4.2): 24 bytes before every management message.

use super::WireError;

/// A MAD's size on a UD QP: header and data.
pub const MAD_LEN: usize = 256;
/// The common header's size.
pub const MAD_HEADER_LEN: usize = 24;
/// The MAD base version.
pub const MAD_BASE_VERSION: u8 = 1;
/// The Communication Management class.
pub const CM_CLASS: u8 = 0x07;
/// The CM class version of IBTA 1.2 (what the kernel's CM sends).
pub const CM_CLASS_VERSION: u8 = 2;

mod field {
    pub(super) const BASE_VERSION: usize = 0;
    pub(super) const MGMT_CLASS: usize = 1;
    pub(super) const CLASS_VERSION: usize = 2;
    pub(super) const METHOD: usize = 3;
    pub(super) const STATUS: usize = 4;
    pub(super) const CLASS_SPECIFIC: usize = 6;
    pub(super) const TRANSACTION_ID: usize = 8;
    pub(super) const ATTR_ID: usize = 16;
    pub(super) const ATTR_MOD: usize = 20;
}

/// MAD methods the CM uses (the response bit, 0x80, is part of the value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Get (0x01): ClassPortInfo queries.
    Get,
    /// Set (0x02).
    Set,
    /// Send (0x03): every CM message.
    Send,
    /// GetResp (0x81).
    GetResp,
    /// Another value.
    Other(u8),
}

impl Method {
    /// The wire value.
    ///
    /// ```
    /// assert_eq!(rnic_cm::wire::Method::Send.raw(), 3);
    /// ```
    pub const fn raw(self) -> u8 {
        match self {
            Method::Get => 0x01,
            Method::Set => 0x02,
            Method::Send => 0x03,
            Method::GetResp => 0x81,
            Method::Other(v) => v,
        }
    }

    /// The method of wire value `v`.
    ///
    /// ```
    /// use rnic_cm::wire::Method;
    /// assert_eq!(Method::from_raw(3), Method::Send);
    /// assert_eq!(Method::from_raw(0x7f), Method::Other(0x7f));
    /// ```
    pub const fn from_raw(v: u8) -> Method {
        match v {
            0x01 => Method::Get,
            0x02 => Method::Set,
            0x03 => Method::Send,
            0x81 => Method::GetResp,
            v => Method::Other(v),
        }
    }
}

/// The common header of a CM MAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mad {
    /// The method (CM messages: Send).
    pub method: Method,
    /// Status (0 in CM messages).
    pub status: u16,
    /// Class specific (0 for the CM).
    pub class_specific: u16,
    /// The transaction ID: a REQ's, echoed by its REP, RTU and REJ.
    pub transaction_id: u64,
    /// Which message follows (REQ 0x0010, ...).
    pub attr_id: u16,
    /// The attribute modifier (0 for CM messages).
    pub attr_mod: u32,
}

impl Mad {
    /// A Send MAD of `attr_id` in transaction `transaction_id`.
    ///
    /// ```
    /// let m = rnic_cm::wire::Mad::send(0x0014, 7);
    /// assert_eq!((m.attr_id, m.transaction_id, m.status), (0x0014, 7, 0));
    /// ```
    pub const fn send(attr_id: u16, transaction_id: u64) -> Mad {
        Mad {
            method: Method::Send,
            status: 0,
            class_specific: 0,
            transaction_id,
            attr_id,
            attr_mod: 0,
        }
    }

    /// Parses the header of `mad`, which must be a whole CM MAD (256 bytes, base version 1,
    /// class 0x07, class version 2).
    ///
    /// ```
    /// use rnic_cm::wire::{Mad, WireError, MAD_LEN};
    /// let mut b = [0u8; MAD_LEN];
    /// Mad::send(0x0010, 1).emit(&mut b);
    /// assert_eq!(Mad::parse(&b).unwrap().attr_id, 0x0010);
    /// b[1] = 0x04; // a performance management MAD
    /// assert_eq!(Mad::parse(&b), Err(WireError::Class(0x04)));
    /// assert_eq!(Mad::parse(&b[..100]), Err(WireError::Short { len: 100 }));
    /// ```
    pub fn parse(mad: &[u8]) -> Result<Mad, WireError> {
        use field::*;
        if mad.len() < MAD_LEN {
            return Err(WireError::Short { len: mad.len() });
        }
        if mad[BASE_VERSION] != MAD_BASE_VERSION {
            return Err(WireError::BaseVersion(mad[BASE_VERSION]));
        }
        if mad[MGMT_CLASS] != CM_CLASS {
            return Err(WireError::Class(mad[MGMT_CLASS]));
        }
        if mad[CLASS_VERSION] != CM_CLASS_VERSION {
            return Err(WireError::ClassVersion(mad[CLASS_VERSION]));
        }
        let be16 = |at: usize| u16::from_be_bytes([mad[at], mad[at + 1]]);
        Ok(Mad {
            method: Method::from_raw(mad[METHOD]),
            status: be16(STATUS),
            class_specific: be16(CLASS_SPECIFIC),
            transaction_id: u64::from_be_bytes(
                mad[TRANSACTION_ID..TRANSACTION_ID + 8]
                    .try_into()
                    .unwrap_or_default(),
            ),
            attr_id: be16(ATTR_ID),
            attr_mod: u32::from_be_bytes(
                mad[ATTR_MOD..ATTR_MOD + 4].try_into().unwrap_or_default(),
            ),
        })
    }

    /// Writes the header into the first 24 bytes of `mad` (at least [`MAD_LEN`] long).
    pub fn emit(&self, mad: &mut [u8]) {
        use field::*;
        mad[BASE_VERSION] = MAD_BASE_VERSION;
        mad[MGMT_CLASS] = CM_CLASS;
        mad[CLASS_VERSION] = CM_CLASS_VERSION;
        mad[METHOD] = self.method.raw();
        mad[STATUS..STATUS + 2].copy_from_slice(&self.status.to_be_bytes());
        mad[CLASS_SPECIFIC..CLASS_SPECIFIC + 2].copy_from_slice(&self.class_specific.to_be_bytes());
        mad[TRANSACTION_ID..TRANSACTION_ID + 8].copy_from_slice(&self.transaction_id.to_be_bytes());
        mad[ATTR_ID..ATTR_ID + 2].copy_from_slice(&self.attr_id.to_be_bytes());
        mad[ATTR_ID + 2..ATTR_MOD].fill(0);
        mad[ATTR_MOD..ATTR_MOD + 4].copy_from_slice(&self.attr_mod.to_be_bytes());
    }
}
