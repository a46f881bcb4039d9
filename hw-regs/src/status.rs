//! Status codes the device reports: the command delivery status (in the command queue
//! entry's `status_own` byte) and the command status (byte 0 of every command output).
//!
//! Every code is an enum with `TryFrom` from its raw value, a PRM name ([`DeliveryStatus::name`])
//! and `Display`. An unknown raw value is an [`UnknownCode`] error, never a panic: the values
//! come from the other side of the bus.
//!
//! ```
//! use rnic_hw_regs::status::{CmdStatus, DeliveryStatus};
//!
//! assert_eq!(DeliveryStatus::try_from(0x3), Ok(DeliveryStatus::BadBlockNumber));
//! assert_eq!(CmdStatus::try_from(0x51).unwrap().name(), "BAD_OUTP_LEN");
//! assert!(CmdStatus::try_from(0x07).is_err());
//! ```

use core::fmt;

/// A raw code that no variant of the named enum carries.
///
/// ```
/// use rnic_hw_regs::status::{CmdStatus, UnknownCode};
///
/// let err = CmdStatus::try_from(0x07).unwrap_err();
/// assert_eq!(err, UnknownCode { kind: "CmdStatus", value: 7 });
/// assert_eq!(err.to_string(), "unknown CmdStatus 0x7");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UnknownCode {
    /// The enum the value was decoded as (e.g. `"DeliveryStatus"`).
    pub kind: &'static str,
    /// The raw value.
    pub value: u32,
}

impl fmt::Display for UnknownCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown {} {:#x}", self.kind, self.value)
    }
}

impl core::error::Error for UnknownCode {}

/// Declares a `#[repr($repr)]` code enum with PRM names, `TryFrom<$repr>` (unknown values give
/// [`UnknownCode`]), `From<Enum> for $repr`, `Display` (`NAME(0xNN)`) and an `ALL` list.
macro_rules! code_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident : $repr:ty {
            $(
                $(#[$vmeta:meta])*
                $variant:ident = $value:literal => $prm:literal,
            )+
        }
    ) => {
        $(#[$meta])*
        #[doc = code_enum!(@example $name; $($variant $value $prm;)+)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr($repr)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant = $value, )+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The PRM / `mlx5_ifc.h` name of the code.
            pub const fn name(self) -> &'static str {
                match self {
                    $( Self::$variant => $prm, )+
                }
            }

            /// The raw value.
            #[inline]
            pub const fn raw(self) -> $repr {
                self as $repr
            }

            /// Decodes a raw value; `None` when no variant carries it.
            #[inline]
            pub const fn from_raw(raw: $repr) -> Option<Self> {
                match raw {
                    $( $value => Some(Self::$variant), )+
                    _ => None,
                }
            }
        }

        impl TryFrom<$repr> for $name {
            type Error = $crate::status::UnknownCode;
            fn try_from(raw: $repr) -> Result<Self, Self::Error> {
                Self::from_raw(raw).ok_or($crate::status::UnknownCode {
                    kind: stringify!($name),
                    value: u32::from(raw),
                })
            }
        }

        impl From<$name> for $repr {
            fn from(v: $name) -> $repr {
                v.raw()
            }
        }

        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, "{}({:#x})", self.name(), self.raw())
            }
        }
    };

    // The doc example: the first variant's raw value, name and decoding.
    (@example $name:ident; $variant:ident $value:literal $prm:literal; $($rest:tt)*) => {
        concat!(
            "\n\n# Example\n\n",
            "```\n",
            "# use rnic_hw_regs::{cqe::*, doorbell::*, eqe::*, init_seg::*, status::*, wqe::*};\n",
            "let v = ", stringify!($name), "::", stringify!($variant), ";\n",
            "assert_eq!(v.raw(), ", stringify!($value), ");\n",
            "assert_eq!(v.name(), ", stringify!($prm), ");\n",
            "assert_eq!(", stringify!($name), "::try_from(", stringify!($value), "), Ok(v));\n",
            "assert!(", stringify!($name), "::ALL.contains(&v));\n",
            "assert!(v.to_string().starts_with(", stringify!($prm), "));\n",
            "```\n",
        )
    };
}
pub(crate) use code_enum;

code_enum! {
    /// Command delivery status: `status_own` bits 7:1 of the command queue entry, written by
    /// the device when it hands the entry back. Anything but `Ok` means the command was not
    /// executed (the output is not valid).
    pub enum DeliveryStatus: u8 {
        /// The command was delivered; see the command status in the output.
        Ok = 0x00 => "OK",
        /// Entry or mailbox signature mismatch (checked only when `cmdif_checksum` is on).
        SignatureError = 0x01 => "SIGNATURE_ERR",
        /// A mailbox token differs from the entry token.
        TokenError = 0x02 => "TOKEN_ERR",
        /// A mailbox block number is out of sequence.
        BadBlockNumber = 0x03 => "BAD_BLOCK_NUMBER",
        /// The output mailbox pointer is not aligned.
        OutputPointerMisaligned = 0x04 => "OUTPUT_POINTER_NOT_ALIGNED",
        /// The input mailbox pointer is not aligned.
        InputPointerMisaligned = 0x05 => "INPUT_POINTER_NOT_ALIGNED",
        /// Firmware internal error.
        FwInternalError = 0x06 => "FW_INTERNAL_ERR",
        /// The input length is inconsistent with the command or the chain.
        InputLengthError = 0x07 => "INPUT_LEN_ERR",
        /// The output length is inconsistent with the command or the chain.
        OutputLengthError = 0x08 => "OUTPUT_LEN_ERR",
        /// A reserved field is not zero.
        ReservedNotZero = 0x09 => "RES_FLD_NOT_CLR_ERR",
        /// The entry type is not 7 (PCIe command transport).
        BadCommandType = 0x10 => "CMD_DATA_ERR",
    }
}

code_enum! {
    /// Command status: byte 0 of every command output (`status` field of `mbox_out`).
    /// Anything but `Ok` comes with a syndrome at output DW@0x04.
    pub enum CmdStatus: u8 {
        /// Success.
        Ok = 0x00 => "OK",
        /// Internal error.
        InternalError = 0x01 => "INT_ERR",
        /// Bad operation: unknown opcode or op_mod.
        BadOp = 0x02 => "BAD_OP",
        /// Bad parameter.
        BadParam = 0x03 => "BAD_PARAM",
        /// Bad system state (e.g. the HCA is not initialized).
        BadSysState = 0x04 => "BAD_SYS_STATE",
        /// Bad resource (e.g. an unknown object number).
        BadResource = 0x05 => "BAD_RES",
        /// Resource busy.
        ResourceBusy = 0x06 => "RES_BUSY",
        /// Limits exceeded.
        LimitsExceeded = 0x08 => "LIM",
        /// The resource is in the wrong state.
        BadResourceState = 0x09 => "BAD_RES_STATE",
        /// Bad index.
        BadIndex = 0x0A => "IX",
        /// No resources left.
        NoResources = 0x0F => "NO_RES",
        /// Bad QP state for the transition.
        BadQpState = 0x10 => "BAD_QP_STATE",
        /// Bad packet.
        BadPacket = 0x30 => "BAD_PKT",
        /// Bad size (e.g. a queue size beyond the capability).
        BadSize = 0x40 => "BAD_SIZE",
        /// The input length is too short for the command.
        BadInputLength = 0x50 => "BAD_INP_LEN",
        /// The output length is too short for the command.
        BadOutputLength = 0x51 => "BAD_OUTP_LEN",
    }
}

impl DeliveryStatus {
    /// Decodes the `status_own` byte of a command queue entry (bits 7:1).
    ///
    /// ```
    /// use rnic_hw_regs::status::DeliveryStatus;
    ///
    /// // status_own 0x05: delivery status 2 (bits 7:1), ownership 1 (bit 0).
    /// assert_eq!(DeliveryStatus::from_status_own(0x05), Ok(DeliveryStatus::TokenError));
    /// assert_eq!(DeliveryStatus::from_status_own(0x00), Ok(DeliveryStatus::Ok));
    /// ```
    pub fn from_status_own(status_own: u8) -> Result<Self, UnknownCode> {
        Self::try_from(status_own >> 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivery_status_values_match_the_prm_list() {
        let expect: [(u8, DeliveryStatus); 11] = [
            (0x0, DeliveryStatus::Ok),
            (0x1, DeliveryStatus::SignatureError),
            (0x2, DeliveryStatus::TokenError),
            (0x3, DeliveryStatus::BadBlockNumber),
            (0x4, DeliveryStatus::OutputPointerMisaligned),
            (0x5, DeliveryStatus::InputPointerMisaligned),
            (0x6, DeliveryStatus::FwInternalError),
            (0x7, DeliveryStatus::InputLengthError),
            (0x8, DeliveryStatus::OutputLengthError),
            (0x9, DeliveryStatus::ReservedNotZero),
            (0x10, DeliveryStatus::BadCommandType),
        ];
        for (raw, st) in expect {
            assert_eq!(DeliveryStatus::try_from(raw), Ok(st));
            assert_eq!(u8::from(st), raw);
        }
        assert_eq!(DeliveryStatus::ALL.len(), expect.len());
        assert_eq!(
            DeliveryStatus::from_status_own(0x07),
            Ok(DeliveryStatus::BadBlockNumber)
        );
        assert_eq!(
            DeliveryStatus::from_status_own(0x01),
            Ok(DeliveryStatus::Ok)
        );
    }

    #[test]
    fn cmd_status_values_match_the_prm_list() {
        let expect: [(u8, CmdStatus); 16] = [
            (0x00, CmdStatus::Ok),
            (0x01, CmdStatus::InternalError),
            (0x02, CmdStatus::BadOp),
            (0x03, CmdStatus::BadParam),
            (0x04, CmdStatus::BadSysState),
            (0x05, CmdStatus::BadResource),
            (0x06, CmdStatus::ResourceBusy),
            (0x08, CmdStatus::LimitsExceeded),
            (0x09, CmdStatus::BadResourceState),
            (0x0A, CmdStatus::BadIndex),
            (0x0F, CmdStatus::NoResources),
            (0x10, CmdStatus::BadQpState),
            (0x30, CmdStatus::BadPacket),
            (0x40, CmdStatus::BadSize),
            (0x50, CmdStatus::BadInputLength),
            (0x51, CmdStatus::BadOutputLength),
        ];
        for (raw, st) in expect {
            assert_eq!(CmdStatus::try_from(raw), Ok(st));
            assert_eq!(st.raw(), raw);
        }
        assert_eq!(CmdStatus::ALL.len(), expect.len());
    }

    #[test]
    fn every_unknown_value_is_a_typed_error() {
        for raw in 0..=u8::MAX {
            match CmdStatus::try_from(raw) {
                Ok(st) => assert_eq!(st.raw(), raw),
                Err(e) => assert_eq!(
                    e,
                    UnknownCode {
                        kind: "CmdStatus",
                        value: raw.into()
                    }
                ),
            }
            match DeliveryStatus::try_from(raw) {
                Ok(st) => assert_eq!(st.raw(), raw),
                Err(e) => assert_eq!(e.kind, "DeliveryStatus"),
            }
        }
    }

    #[test]
    fn names_and_display() {
        extern crate std;
        use std::string::ToString;
        assert_eq!(DeliveryStatus::TokenError.name(), "TOKEN_ERR");
        assert_eq!(CmdStatus::BadQpState.to_string(), "BAD_QP_STATE(0x10)");
        let e = CmdStatus::try_from(0x07).unwrap_err();
        assert_eq!(e.to_string(), "unknown CmdStatus 0x7");
    }
}
