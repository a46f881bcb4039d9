//! Atomic capabilities (`atomic_caps`, cap type 3).

// Field names keep `mlx5_ifc.h` spelling (`8B`) so they match the PRM and the header.
#![allow(non_snake_case)]

prm_layout! {
    /// Atomic capabilities (`mlx5_ifc_atomic_caps_bits`, 0x100 bytes): QUERY_HCA_CAP op_mod 0x6
    /// (max) / 0x7 (current). Set `atomic_req_8B_endianness_mode` = 1 with SET_HCA_CAP when
    /// supported, else 8-byte atomic results are big-endian.
    pub struct AtomicCaps("atomic_caps", 0x100) {
        /// Endianness of 8-byte atomic responses: 0 big-endian, 1 host endianness (set 1 when
        /// supported).
        atomic_req_8B_endianness_mode / set_atomic_req_8B_endianness_mode: u8 = dw(0x08, 31, 30);
        /// Mode 1 of atomic_req_8B_endianness_mode is supported.
        supported_atomic_req_8B_endianness_mode_1 / set_supported_atomic_req_8B_endianness_mode_1: bool = dw(0x08, 25, 25);
        /// Bit mask of supported atomic operations (bit 0 compare-and-swap, bit 1 fetch-and-add,
        /// ...).
        atomic_operations / set_atomic_operations: u16 = dw(0x10, 15, 0);
        /// Bit mask of supported atomic operand sizes on QPs (bit n = 2^n bytes).
        atomic_size_qp / set_atomic_size_qp: u16 = dw(0x14, 15, 0);
        /// Bit mask of supported atomic operand sizes on DC.
        atomic_size_dc / set_atomic_size_dc: u16 = dw(0x18, 15, 0);
    }
}
