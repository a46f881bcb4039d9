//! The CM messages, one room each. Every message is a `Repr` with public fields, `parse`
//! (checks the MAD header and the attribute) and `emit` (the whole 256-byte MAD, reserved
//! bits zero); the field positions are IBTA Vol. 1 tables 106 to 120.

/// Declares a CM message: its fields (integer fields at (byte, bit, width); byte arrays at a
/// byte offset) and its private data, with `ATTR_ID`, `parse`, `emit` and an all-zero
/// `Default`.
macro_rules! cm_message {
    (
        $(#[$doc:meta])*
        $name:ident, attr $attr:expr, private_data $pd_at:expr, $pd_len:expr;
        $( $(#[$fdoc:meta])* $field:ident : $ty:ty = ($byte:expr, $bit:expr, $width:expr) ),* $(,)?
        $(; $( $(#[$adoc:meta])* $afield:ident : [u8; $alen:expr] = $abyte:expr ),* $(,)? )?
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name {
            $( $(#[$fdoc])* pub $field: $ty, )*
            $($( $(#[$adoc])* pub $afield: [u8; $alen], )*)?
            /// Private data (the consumer's; rdma_cm puts its IP header first in a REQ).
            pub private_data: [u8; $pd_len],
        }

        #[allow(non_upper_case_globals)]
        mod field {
            use crate::wire::Field;
            $( pub(super) const $field: Field = Field::at($byte, $bit, $width); )*
        }

        impl Default for $name {
            fn default() -> Self {
                Self {
                    $( $field: 0, )*
                    $($( $afield: [0; $alen], )*)?
                    private_data: [0; $pd_len],
                }
            }
        }

        impl $name {
            /// The MAD attribute ID of this message.
            pub const ATTR_ID: u16 = $attr;
            /// Bytes of private data it carries.
            pub const PRIVATE_DATA_LEN: usize = $pd_len;

            #[doc = concat!("Parses a whole CM MAD carrying a ", stringify!($name), ".\n\n```\n",
                "use rnic_cm::wire::{", stringify!($name), ", MAD_LEN};\n",
                "let m = ", stringify!($name), "::default();\n",
                "let mut mad = [0u8; MAD_LEN];\n",
                "m.emit(9, &mut mad);\n",
                "assert_eq!(", stringify!($name), "::parse(&mad), Ok(m));\n",
                "assert!(", stringify!($name), "::parse(&mad[..255]).is_err());\n```")]
            pub fn parse(mad: &[u8]) -> Result<Self, crate::wire::WireError> {
                crate::wire::check(mad, Self::ATTR_ID)?;
                Ok(Self {
                    $( $field: field::$field.get(mad) as $ty, )*
                    $($( $afield: crate::wire::bytes(mad, $abyte), )*)?
                    private_data: crate::wire::bytes(mad, $pd_at),
                })
            }

            #[doc = concat!("Writes the whole MAD of this ", stringify!($name),
                " in transaction `transaction_id` (a Send, reserved bits zero).\n\n```\n",
                "use rnic_cm::wire::{", stringify!($name), ", Mad, MAD_LEN};\n",
                "let mut mad = [0u8; MAD_LEN];\n",
                stringify!($name), "::default().emit(5, &mut mad);\n",
                "assert_eq!(Mad::parse(&mad).unwrap().attr_id, ", stringify!($name), "::ATTR_ID);\n```")]
            pub fn emit(&self, transaction_id: u64, mad: &mut [u8; crate::wire::MAD_LEN]) {
                mad.fill(0);
                crate::wire::Mad::send(Self::ATTR_ID, transaction_id).emit(mad);
                $( field::$field.set(mad, u64::from(self.$field)); )*
                $($( crate::wire::put(mad, $abyte, &self.$afield); )*)?
                crate::wire::put(mad, $pd_at, &self.private_data);
            }
        }
    };
}

pub(crate) mod drep;
pub(crate) mod dreq;
pub(crate) mod mra;
pub(crate) mod rej;
pub(crate) mod rep;
pub(crate) mod req;
pub(crate) mod rtu;
pub(crate) mod sidr;
