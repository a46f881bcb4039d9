//! Command inputs and outputs, one file per command family, named as in `mlx5_ifc.h`
//! (`query_issi_out` is [`QueryIssiOut`]), plus the opcode table ([`CmdOpcode`]), the
//! `op_mod` values ([`op_mod`]) and the header every command shares ([`CmdHdrIn`],
//! [`CmdHdrOut`]).
//!
//! Every input starts with `DW@0x00 [31:16]` opcode, `[15:0]` uid and `DW@0x04 [15:0]`
//! op_mod; every output with `DW@0x00 [31:24]` status and `DW@0x04` syndrome. Each input
//! type implements [`CmdIn`], which names its opcode and output type, and has a `new_cmd()`
//! constructor that returns a zeroed input with the opcode set.
//!
//! ```
//! use rnic_hw_regs::cmd::{CmdIn, CmdOpcode, CreateEqIn};
//! use zerocopy::IntoBytes;
//!
//! let mut cmd = CreateEqIn::new_cmd();
//! cmd.eq_context_entry_mut().set_log_eq_size(6);
//! assert_eq!(CreateEqIn::OPCODE, CmdOpcode::CreateEq);
//! assert_eq!(&cmd.as_bytes()[0..2], &[0x03, 0x01]);
//! ```

use core::fmt;

/// Implements [`CmdIn`] for an input layout and gives it a `new_cmd()` constructor.
macro_rules! cmd_pair {
    ($in:ident, $out:ty, $op:ident) => {
        impl $crate::cmd::CmdIn for $in {
            const OPCODE: $crate::cmd::CmdOpcode = $crate::cmd::CmdOpcode::$op;
            type Out = $out;
        }

        impl $in {
            #[doc = concat!(
                "A zeroed input with `opcode` = ", stringify!($op), " (the rest is for the caller).",
                "\n\n```\n",
                "use rnic_hw_regs::cmd::{CmdIn, CmdOpcode, ", stringify!($in), "};\n\n",
                "let cmd = ", stringify!($in), "::new_cmd();\n",
                "assert_eq!(cmd.opcode(), CmdOpcode::", stringify!($op), ".code());\n",
                "assert_eq!(", stringify!($in), "::OPCODE, CmdOpcode::", stringify!($op), ");\n",
                "```\n",
            )]
            pub fn new_cmd() -> Self {
                let mut cmd = Self::default();
                cmd.set_opcode($crate::cmd::CmdOpcode::$op.code());
                cmd
            }
        }
    };
}

mod access_reg;
mod caps;
mod cq;
mod eq;
mod flow;
mod hca;
mod mkey;
mod pages;
mod pd_uar;
mod qp;
mod roce_addr;
mod rq;
mod sq;
mod srq;
mod tir;
mod tis;
mod transport_domain;
mod vport;

pub use access_reg::*;
pub use caps::*;
pub use cq::*;
pub use eq::*;
pub use flow::*;
pub use hca::*;
pub use mkey::*;
pub use pages::*;
pub use pd_uar::*;
pub use qp::*;
pub use roce_addr::*;
pub use rq::*;
pub use sq::*;
pub use srq::*;
pub use tir::*;
pub use tis::*;
pub use transport_domain::*;
pub use vport::*;

/// A command input layout: its opcode and the layout of its output.
///
/// A generic helper that builds any command input and names its output type.
///
/// ```
/// use rnic_hw_regs::cmd::{CmdIn, CmdOpcode, QueryIssiIn};
/// use rnic_hw_regs::PrmLayout;
///
/// fn output_len<C: CmdIn>() -> usize {
///     <C::Out as PrmLayout>::SIZE
/// }
/// assert_eq!(QueryIssiIn::OPCODE, CmdOpcode::QueryIssi);
/// assert_eq!(output_len::<QueryIssiIn>(), 0x70);
/// ```
pub trait CmdIn: crate::PrmLayout + Default {
    /// The command's opcode.
    const OPCODE: CmdOpcode;
    /// The command's output layout.
    type Out: crate::PrmLayout;
}

prm_layout! {
    /// The first 8 bytes of every command input (the PRM's generic `mbox_in`): opcode, uid
    /// and op_mod. Enough to dispatch a command before knowing its layout.
    pub struct CmdHdrIn("", 0x08) {
        /// Command opcode (see [`CmdOpcode`]).
        opcode / set_opcode: u16 = dw(0x00, 31, 16);
        /// User context ID (0 for the kernel-level driver).
        uid / set_uid: u16 = dw(0x00, 15, 0);
        /// Opcode modifier.
        op_mod / set_op_mod: u16 = dw(0x04, 15, 0);
    }
}

prm_layout! {
    /// The first 8 bytes of every command output (the PRM's generic `mbox_out`): status and
    /// syndrome. It is 8 bytes, not 16, because some outputs (ENABLE_HCA, DISABLE_HCA) are
    /// only 0xC bytes long.
    pub struct CmdHdrOut("", 0x08) {
        /// Command status (0 = OK, see [`crate::status`]).
        status / set_status: u8 = dw(0x00, 31, 24);
        /// Firmware syndrome explaining a failed status.
        syndrome / set_syndrome: u32 = dw(0x04, 31, 0);
    }
}

/// An opcode that is not in the PRM table this crate knows.
///
/// ```
/// use rnic_hw_regs::cmd::{CmdOpcode, UnknownOpcode};
///
/// assert_eq!(CmdOpcode::try_from(0xFFFF), Err(UnknownOpcode(0xFFFF)));
/// assert_eq!(UnknownOpcode(0x999).to_string(), "unknown command opcode 0x999");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnknownOpcode(pub u16);

impl fmt::Display for UnknownOpcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown command opcode {:#x}", self.0)
    }
}

impl core::error::Error for UnknownOpcode {}

macro_rules! opcodes {
    ($($(#[$m:meta])* $v:ident = $code:literal, $name:literal;)*) => {
        /// Command opcodes of the PRM table (input `DW@0x00 [31:16]`).
        ///
        /// ```
        /// use rnic_hw_regs::cmd::CmdOpcode;
        ///
        /// let op = CmdOpcode::try_from(0x301).unwrap();
        /// assert_eq!(op, CmdOpcode::CreateEq);
        /// assert_eq!(op.to_string(), "CREATE_EQ");
        /// assert_eq!(u16::from(op), 0x301);
        /// assert!(CmdOpcode::ALL.contains(&op));
        /// ```
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u16)]
        pub enum CmdOpcode {
            $($(#[$m])* $v = $code,)*
        }

        impl CmdOpcode {
            /// Every opcode, in table order.
            pub const ALL: &'static [CmdOpcode] = &[$(CmdOpcode::$v,)*];

            /// The name the Linux driver prints for this command (e.g. `"ENABLE_HCA"`).
            ///
            /// ```
            /// use rnic_hw_regs::cmd::CmdOpcode;
            ///
            /// assert_eq!(CmdOpcode::EnableHca.name(), "ENABLE_HCA");
            /// ```
            pub const fn name(self) -> &'static str {
                match self {
                    $(CmdOpcode::$v => $name,)*
                }
            }
        }

        impl TryFrom<u16> for CmdOpcode {
            type Error = UnknownOpcode;

            fn try_from(code: u16) -> Result<Self, UnknownOpcode> {
                match code {
                    $($code => Ok(CmdOpcode::$v),)*
                    other => Err(UnknownOpcode(other)),
                }
            }
        }
    };
}

opcodes! {
    /// Query device capabilities.
    QueryHcaCap = 0x100, "QUERY_HCA_CAP";
    /// Query adapter vendor data.
    QueryAdapter = 0x101, "QUERY_ADAPTER";
    /// Start the HCA.
    InitHca = 0x102, "INIT_HCA";
    /// Stop the HCA.
    TeardownHca = 0x103, "TEARDOWN_HCA";
    /// Enable the function (first command).
    EnableHca = 0x104, "ENABLE_HCA";
    /// Disable the function (last command).
    DisableHca = 0x105, "DISABLE_HCA";
    /// Ask how many firmware pages are needed.
    QueryPages = 0x107, "QUERY_PAGES";
    /// Give or take firmware pages.
    ManagePages = 0x108, "MANAGE_PAGES";
    /// Set device capabilities.
    SetHcaCap = 0x109, "SET_HCA_CAP";
    /// Query the interface step sequence IDs.
    QueryIssi = 0x10A, "QUERY_ISSI";
    /// Select the interface step sequence ID.
    SetIssi = 0x10B, "SET_ISSI";
    /// Create a memory key.
    CreateMkey = 0x200, "CREATE_MKEY";
    /// Query a memory key.
    QueryMkey = 0x201, "QUERY_MKEY";
    /// Destroy a memory key.
    DestroyMkey = 0x202, "DESTROY_MKEY";
    /// Query the reserved lkey and special mkeys.
    QuerySpecialContexts = 0x203, "QUERY_SPECIAL_CONTEXTS";
    /// Create an event queue.
    CreateEq = 0x301, "CREATE_EQ";
    /// Destroy an event queue.
    DestroyEq = 0x302, "DESTROY_EQ";
    /// Query an event queue.
    QueryEq = 0x303, "QUERY_EQ";
    /// Generate an EQE (debugging).
    GenEqe = 0x304, "GEN_EQE";
    /// Create a completion queue.
    CreateCq = 0x400, "CREATE_CQ";
    /// Destroy a completion queue.
    DestroyCq = 0x401, "DESTROY_CQ";
    /// Query a completion queue.
    QueryCq = 0x402, "QUERY_CQ";
    /// Modify (moderate or resize) a completion queue.
    ModifyCq = 0x403, "MODIFY_CQ";
    /// Create a queue pair.
    CreateQp = 0x500, "CREATE_QP";
    /// Destroy a queue pair.
    DestroyQp = 0x501, "DESTROY_QP";
    /// QP transition RESET to INIT.
    Rst2InitQp = 0x502, "RST2INIT_QP";
    /// QP transition INIT to RTR.
    Init2RtrQp = 0x503, "INIT2RTR_QP";
    /// QP transition RTR to RTS.
    Rtr2RtsQp = 0x504, "RTR2RTS_QP";
    /// QP transition RTS to RTS (change parameters).
    Rts2RtsQp = 0x505, "RTS2RTS_QP";
    /// QP transition SQ error to RTS.
    Sqerr2RtsQp = 0x506, "SQERR2RTS_QP";
    /// QP transition any state to ERROR.
    Qp2Err = 0x507, "2ERR_QP";
    /// QP transition any state to RESET.
    Qp2Rst = 0x50A, "2RST_QP";
    /// Query a queue pair.
    QueryQp = 0x50B, "QUERY_QP";
    /// QP transition INIT to INIT (change parameters).
    Init2InitQp = 0x50E, "INIT2INIT_QP";
    /// Create a shared receive queue.
    CreateSrq = 0x700, "CREATE_SRQ";
    /// Destroy a shared receive queue.
    DestroySrq = 0x701, "DESTROY_SRQ";
    /// Query a shared receive queue.
    QuerySrq = 0x702, "QUERY_SRQ";
    /// Arm an SRQ limit event.
    ArmRq = 0x703, "ARM_RQ";
    /// Resize a shared receive queue (no `mlx5_ifc.h` layout).
    ResizeSrq = 0x704, "RESIZE_SRQ";
    /// Query a vport's state.
    QueryVportState = 0x750, "QUERY_VPORT_STATE";
    /// Modify a vport's administrative state.
    ModifyVportState = 0x751, "MODIFY_VPORT_STATE";
    /// Query the NIC vport context (MAC, MTU, roce_en).
    QueryNicVportContext = 0x754, "QUERY_NIC_VPORT_CONTEXT";
    /// Modify the NIC vport context.
    ModifyNicVportContext = 0x755, "MODIFY_NIC_VPORT_CONTEXT";
    /// Read a GID table entry.
    QueryRoceAddress = 0x760, "QUERY_ROCE_ADDRESS";
    /// Write a GID table entry.
    SetRoceAddress = 0x761, "SET_ROCE_ADDRESS";
    /// Allocate a protection domain.
    AllocPd = 0x800, "ALLOC_PD";
    /// Free a protection domain.
    DeallocPd = 0x801, "DEALLOC_PD";
    /// Allocate a UAR page.
    AllocUar = 0x802, "ALLOC_UAR";
    /// Free a UAR page.
    DeallocUar = 0x803, "DEALLOC_UAR";
    /// Read or write a device register.
    AccessReg = 0x805, "ACCESS_REG";
    /// Do nothing.
    Nop = 0x80D, "NOP";
    /// Allocate a transport domain.
    AllocTransportDomain = 0x816, "ALLOC_TRANSPORT_DOMAIN";
    /// Free a transport domain.
    DeallocTransportDomain = 0x817, "DEALLOC_TRANSPORT_DOMAIN";
    /// Create a transport interface receive object.
    CreateTir = 0x900, "CREATE_TIR";
    /// Destroy a TIR.
    DestroyTir = 0x902, "DESTROY_TIR";
    /// Query a TIR.
    QueryTir = 0x903, "QUERY_TIR";
    /// Create an Ethernet send queue.
    CreateSq = 0x904, "CREATE_SQ";
    /// Modify an SQ (state transitions).
    ModifySq = 0x905, "MODIFY_SQ";
    /// Destroy an SQ.
    DestroySq = 0x906, "DESTROY_SQ";
    /// Query an SQ.
    QuerySq = 0x907, "QUERY_SQ";
    /// Create an Ethernet receive queue.
    CreateRq = 0x908, "CREATE_RQ";
    /// Modify an RQ (state transitions).
    ModifyRq = 0x909, "MODIFY_RQ";
    /// Destroy an RQ.
    DestroyRq = 0x90A, "DESTROY_RQ";
    /// Query an RQ.
    QueryRq = 0x90B, "QUERY_RQ";
    /// Create a transport interface send object.
    CreateTis = 0x912, "CREATE_TIS";
    /// Destroy a TIS.
    DestroyTis = 0x914, "DESTROY_TIS";
    /// Query a TIS.
    QueryTis = 0x915, "QUERY_TIS";
    /// Set the root flow table of a table type.
    SetFlowTableRoot = 0x92F, "SET_FLOW_TABLE_ROOT";
    /// Create a flow table.
    CreateFlowTable = 0x930, "CREATE_FLOW_TABLE";
    /// Destroy a flow table.
    DestroyFlowTable = 0x931, "DESTROY_FLOW_TABLE";
    /// Query a flow table.
    QueryFlowTable = 0x932, "QUERY_FLOW_TABLE";
    /// Create a flow group.
    CreateFlowGroup = 0x933, "CREATE_FLOW_GROUP";
    /// Destroy a flow group.
    DestroyFlowGroup = 0x934, "DESTROY_FLOW_GROUP";
    /// Set (create or modify) a flow table entry.
    SetFlowTableEntry = 0x936, "SET_FLOW_TABLE_ENTRY";
    /// Query a flow table entry.
    QueryFlowTableEntry = 0x937, "QUERY_FLOW_TABLE_ENTRY";
    /// Delete a flow table entry.
    DeleteFlowTableEntry = 0x938, "DELETE_FLOW_TABLE_ENTRY";
}

impl CmdOpcode {
    /// The opcode value (input `DW@0x00 [31:16]`).
    ///
    /// ```
    /// use rnic_hw_regs::cmd::CmdOpcode;
    ///
    /// assert_eq!(CmdOpcode::QueryHcaCap.code(), 0x100);
    /// ```
    pub const fn code(self) -> u16 {
        self as u16
    }
}

impl fmt::Display for CmdOpcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<CmdOpcode> for u16 {
    fn from(op: CmdOpcode) -> u16 {
        op.code()
    }
}

/// `op_mod` values (input `DW@0x04 [15:0]`) of the commands that use them.
pub mod op_mod {
    /// QUERY_PAGES: pages needed before INIT_HCA's boot stage.
    pub const QUERY_PAGES_BOOT: u16 = 1;
    /// QUERY_PAGES: pages needed for INIT_HCA.
    pub const QUERY_PAGES_INIT: u16 = 2;
    /// QUERY_PAGES: pages needed after INIT_HCA.
    pub const QUERY_PAGES_REGULAR: u16 = 3;

    /// MANAGE_PAGES: the driver cannot supply the requested pages.
    pub const MANAGE_PAGES_CANT_GIVE: u16 = 0;
    /// MANAGE_PAGES: give pages to firmware.
    pub const MANAGE_PAGES_GIVE: u16 = 1;
    /// MANAGE_PAGES: take pages back from firmware.
    pub const MANAGE_PAGES_TAKE: u16 = 2;

    /// HCA cap type: general device capabilities ([`crate::caps::CmdHcaCap`]).
    pub const HCA_CAP_GENERAL: u16 = 0;
    /// HCA cap type: on-demand paging ([`crate::caps::OdpCap`]).
    pub const HCA_CAP_ODP: u16 = 2;
    /// HCA cap type: atomic operations ([`crate::caps::AtomicCaps`]).
    pub const HCA_CAP_ATOMIC: u16 = 3;
    /// HCA cap type: RoCE ([`crate::caps::RoceCap`]).
    pub const HCA_CAP_ROCE: u16 = 4;
    /// QUERY_HCA_CAP mode: the maximum the device supports.
    pub const HCA_CAP_MAX: u16 = 0;
    /// QUERY_HCA_CAP mode: the current (configured) values.
    pub const HCA_CAP_CURRENT: u16 = 1;

    /// QUERY_HCA_CAP `op_mod` for a cap type and mode: `(cap_type << 1) | mode`.
    ///
    /// ```
    /// use rnic_hw_regs::cmd::op_mod::{query_hca_cap, HCA_CAP_CURRENT, HCA_CAP_ROCE};
    ///
    /// assert_eq!(query_hca_cap(HCA_CAP_ROCE, HCA_CAP_CURRENT), 0x9);
    /// ```
    pub const fn query_hca_cap(cap_type: u16, mode: u16) -> u16 {
        (cap_type << 1) | (mode & 1)
    }

    /// SET_HCA_CAP `op_mod` for a cap type: `cap_type << 1`.
    ///
    /// ```
    /// use rnic_hw_regs::cmd::op_mod::{set_hca_cap, HCA_CAP_ATOMIC};
    ///
    /// assert_eq!(set_hca_cap(HCA_CAP_ATOMIC), 0x6);
    /// ```
    pub const fn set_hca_cap(cap_type: u16) -> u16 {
        cap_type << 1
    }

    /// ACCESS_REG: write the register.
    pub const ACCESS_REG_WRITE: u16 = 0;
    /// ACCESS_REG: read the register.
    pub const ACCESS_REG_READ: u16 = 1;

    /// MODIFY_CQ: modify moderation fields.
    pub const MODIFY_CQ_MODIFY: u16 = 0;
    /// MODIFY_CQ: resize the CQ.
    pub const MODIFY_CQ_RESIZE: u16 = 1;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PrmLayout;
    use zerocopy::FromBytes;

    #[test]
    fn opcodes_round_trip() {
        for &op in CmdOpcode::ALL {
            assert_eq!(CmdOpcode::try_from(op.code()), Ok(op));
        }
        assert_eq!(CmdOpcode::try_from(0x104), Ok(CmdOpcode::EnableHca));
        assert_eq!(CmdOpcode::EnableHca.name(), "ENABLE_HCA");
        assert_eq!(CmdOpcode::Qp2Err.name(), "2ERR_QP");
        assert_eq!(CmdOpcode::try_from(0x106), Err(UnknownOpcode(0x106)));
        assert_eq!(CmdOpcode::ALL.len(), 51 + 25);
    }

    #[test]
    fn op_mods() {
        assert_eq!(
            op_mod::query_hca_cap(op_mod::HCA_CAP_ROCE, op_mod::HCA_CAP_CURRENT),
            0x9
        );
        assert_eq!(
            op_mod::query_hca_cap(op_mod::HCA_CAP_ROCE, op_mod::HCA_CAP_MAX),
            0x8
        );
        assert_eq!(op_mod::set_hca_cap(op_mod::HCA_CAP_ATOMIC), 0x6);
    }

    #[test]
    fn header_reads_any_command() {
        let bytes = [0x01, 0x0A, 0, 0, 0, 0, 0, 0x02, 0, 0, 0, 0, 0, 0, 0, 0];
        let (h, _) = CmdHdrIn::ref_from_prefix(&bytes).unwrap();
        assert_eq!(CmdOpcode::try_from(h.opcode()), Ok(CmdOpcode::QueryIssi));
        assert_eq!(h.op_mod(), 2);
        let out = [0x05, 0, 0, 0, 0x12, 0x34, 0x56, 0x78, 0, 0, 0, 0];
        let (o, _) = CmdHdrOut::ref_from_prefix(&out).unwrap();
        assert_eq!((o.status(), o.syndrome()), (5, 0x1234_5678));
        assert_eq!(CmdHdrIn::SIZE, 8);
    }
}
