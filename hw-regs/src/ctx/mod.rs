//! Contexts: the structures embedded in command inputs and outputs that describe a queue,
//! a memory key or an address (`mlx5_ifc.h` `*_context` / `*c_bits` structures), and the
//! values their fields take.

/// Declares a context field's value enum: `#[repr(u8)]`, `TryFrom<u8>` (a value outside the
/// PRM encoding is an [`InvalidValue`]) and `From<Enum> for u8`.
macro_rules! ctx_value_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum $name {
            $( $(#[$vmeta])* $variant = $value, )+
        }

        impl TryFrom<u8> for $name {
            type Error = $crate::ctx::InvalidValue;

            fn try_from(v: u8) -> Result<Self, $crate::ctx::InvalidValue> {
                match v {
                    $( $value => Ok(Self::$variant), )+
                    other => Err($crate::ctx::InvalidValue(other)),
                }
            }
        }

        impl From<$name> for u8 {
            fn from(v: $name) -> u8 {
                v as u8
            }
        }
    };
}

mod ads;
mod cqc;
mod eqc;
mod flow_context;
mod flow_table_context;
mod fte_match;
mod mkc;
mod nic_vport_context;
mod qpc;
mod roce_addr_layout;
mod rqc;
mod sqc;
mod srqc;
mod tirc;
mod tisc;
mod wq;

pub use ads::*;
pub use cqc::*;
pub use eqc::*;
pub use flow_context::*;
pub use flow_table_context::*;
pub use fte_match::*;
pub use mkc::*;
pub use nic_vport_context::*;
pub use qpc::*;
pub use roce_addr_layout::*;
pub use rqc::*;
pub use sqc::*;
pub use srqc::*;
pub use tirc::*;
pub use tisc::*;
pub use wq::*;

/// Error for a context field value outside its PRM encoding.
///
/// ```
/// use rnic_hw_regs::ctx::{InvalidValue, QpState};
///
/// assert_eq!(QpState::try_from(5), Err(InvalidValue(5)));
/// assert_eq!(InvalidValue(5).to_string(), "invalid context field value 0x5");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidValue(pub u8);

impl core::fmt::Display for InvalidValue {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "invalid context field value {:#x}", self.0)
    }
}

impl core::error::Error for InvalidValue {}

/// QP state (`qpc.state`).
///
/// ```
/// use rnic_hw_regs::ctx::{Qpc, QpState};
///
/// let mut qpc = Qpc::default();
/// qpc.set_state(QpState::Rts.into());
/// assert_eq!(QpState::try_from(qpc.state()), Ok(QpState::Rts));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum QpState {
    /// Reset.
    Rst = 0,
    /// Initialized.
    Init = 1,
    /// Ready to receive.
    Rtr = 2,
    /// Ready to send.
    Rts = 3,
    /// Send queue error.
    Sqer = 4,
    /// Error.
    Err = 6,
    /// Send queue drained.
    Sqd = 7,
}

impl TryFrom<u8> for QpState {
    type Error = InvalidValue;

    fn try_from(v: u8) -> Result<Self, InvalidValue> {
        Ok(match v {
            0 => QpState::Rst,
            1 => QpState::Init,
            2 => QpState::Rtr,
            3 => QpState::Rts,
            4 => QpState::Sqer,
            6 => QpState::Err,
            7 => QpState::Sqd,
            other => return Err(InvalidValue(other)),
        })
    }
}

impl From<QpState> for u8 {
    fn from(s: QpState) -> u8 {
        s as u8
    }
}

/// QP service type (`qpc.st`), as `mlx5_ifc.h` numbers them (`MLX5_QPC_ST_*`): RC 0, UC 1,
/// UD 2, QP1 8 (the GSI QP of a port: UD datagrams to and from QP number 1; firmware gives
/// it a QPN of its own and steers DestQP 1 to it). XRC (3) and the rest are not modelled.
///
/// ```
/// use rnic_hw_regs::ctx::{Qpc, QpSt};
///
/// let mut qpc = Qpc::default();
/// qpc.set_st(QpSt::Ud.into());
/// assert_eq!(qpc.st(), 2);
/// assert_eq!(QpSt::try_from(8), Ok(QpSt::Qp1));
/// assert!(QpSt::Qp1.is_datagram() && !QpSt::Uc.is_datagram());
/// assert_eq!(QpSt::try_from(3).unwrap_err().0, 3); // XRC
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum QpSt {
    /// Reliable connected.
    Rc = 0,
    /// Unreliable connected.
    Uc = 1,
    /// Unreliable datagram.
    Ud = 2,
    /// The port's QP1 (General Services Interface): UD semantics, DestQP / source QP 1.
    Qp1 = 8,
}

impl QpSt {
    /// Whether the QP takes and sends datagrams (UD and QP1: DETH, Q_Key, the GRH area).
    pub const fn is_datagram(self) -> bool {
        matches!(self, QpSt::Ud | QpSt::Qp1)
    }
}

impl TryFrom<u8> for QpSt {
    type Error = InvalidValue;

    fn try_from(v: u8) -> Result<Self, InvalidValue> {
        Ok(match v {
            0 => QpSt::Rc,
            1 => QpSt::Uc,
            2 => QpSt::Ud,
            8 => QpSt::Qp1,
            other => return Err(InvalidValue(other)),
        })
    }
}

impl From<QpSt> for u8 {
    fn from(s: QpSt) -> u8 {
        s as u8
    }
}

/// Bits of `opt_param_mask` (CREATE_QP and the QP modify commands, DW@0x10): which optional
/// QP context fields the command carries.
///
/// ```
/// use rnic_hw_regs::ctx::opt_param;
///
/// // RTR -> RTS carrying the retry counts and the ACK timeout.
/// let mask = opt_param::RETRY_COUNT | opt_param::RNR_RETRY | opt_param::ACK_TIMEOUT;
/// assert_eq!(mask, 0x7000);
/// ```
pub mod opt_param {
    /// Alternate address path.
    pub const ALT_ADDR_PATH: u32 = 1 << 0;
    /// Remote read enable (`rre`).
    pub const RRE: u32 = 1 << 1;
    /// Remote atomic enable (`rae`).
    pub const RAE: u32 = 1 << 2;
    /// Remote write enable (`rwe`).
    pub const RWE: u32 = 1 << 3;
    /// P_Key index.
    pub const PKEY_INDEX: u32 = 1 << 4;
    /// Q_Key.
    pub const Q_KEY: u32 = 1 << 5;
    /// Minimum RNR NAK timer (`min_rnr_nak`).
    pub const RNR_TIMEOUT: u32 = 1 << 6;
    /// Primary address path.
    pub const PRIMARY_ADDR_PATH: u32 = 1 << 7;
    /// Outstanding reads/atomics as requester (`log_sra_max`).
    pub const SRA_MAX: u32 = 1 << 8;
    /// Outstanding reads/atomics as responder (`log_rra_max`).
    pub const RRA_MAX: u32 = 1 << 9;
    /// Path migration state.
    pub const PM_STATE: u32 = 1 << 10;
    /// Transport retry count.
    pub const RETRY_COUNT: u32 = 1 << 12;
    /// RNR retry count.
    pub const RNR_RETRY: u32 = 1 << 13;
    /// Local ACK timeout.
    pub const ACK_TIMEOUT: u32 = 1 << 14;
    /// Primary port.
    pub const PRI_PORT: u32 = 1 << 16;
    /// SRQ number.
    pub const SRQN: u32 = 1 << 18;
    /// Receive CQ.
    pub const CQN_RCV: u32 = 1 << 19;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qp_state_and_st_round_trip() {
        for v in 0..=255u8 {
            if let Ok(s) = QpState::try_from(v) {
                assert_eq!(u8::from(s), v);
            }
            if let Ok(s) = QpSt::try_from(v) {
                assert_eq!(u8::from(s), v);
            }
        }
        assert_eq!(QpState::try_from(5), Err(InvalidValue(5)));
        assert_eq!(QpState::try_from(3), Ok(QpState::Rts));
        assert_eq!(QpSt::try_from(2), Ok(QpSt::Ud));
        assert_eq!(
            QpSt::try_from(3),
            Err(InvalidValue(3)),
            "st 3 is XRC, not modelled"
        );
        assert_eq!(QpSt::try_from(8), Ok(QpSt::Qp1));
        assert_eq!(opt_param::CQN_RCV, 0x8_0000);
    }
}
