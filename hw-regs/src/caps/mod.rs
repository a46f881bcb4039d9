//! Device capabilities: the blocks QUERY_HCA_CAP returns and SET_HCA_CAP writes, one per cap
//! type (`op_mod` = cap_type << 1 | mode, see [`crate::cmd::op_mod`]).
//!
//! Each block is 0x100 bytes in `mlx5_ifc.h`; the command carries them inside the 0x1000-byte
//! [`HcaCapUnion`] at byte 0x10.

mod atomic;
mod general;
mod odp;
mod roce;

pub use atomic::AtomicCaps;
pub use general::CmdHcaCap;
pub use odp::{OdpCap, OdpPerTransportServiceCap};
pub use roce::RoceCap;

prm_layout! {
    /// The capability block of QUERY_HCA_CAP and SET_HCA_CAP (`mlx5_ifc_hca_cap_union_bits`, 0x1000
    /// bytes): a union, every member starts at byte 0 and the cap type in `op_mod` says which one
    /// is valid. Only the members this crate uses are declared.
    pub struct HcaCapUnion("hca_cap_union", 0x1000) {
        /// General device capabilities (cap type 0).
        cmd_hca_cap / cmd_hca_cap_mut: CmdHcaCap = nested(0x00);
        /// On-demand paging capabilities (cap type 2).
        odp_cap / odp_cap_mut: OdpCap = nested(0x00);
        /// Atomic capabilities (cap type 3).
        atomic_caps / atomic_caps_mut: AtomicCaps = nested(0x00);
        /// RoCE capabilities (cap type 4).
        roce_cap / roce_cap_mut: RoceCap = nested(0x00);
    }
}
