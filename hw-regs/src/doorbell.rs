//! Doorbells: the QP and CQ doorbell records in host memory, the CQ arm word, the EQ doorbell
//! value, and the UAR page offsets they are written to.
//!
//! UAR page n is at BAR0 + n * 4 KiB ([`uar_bar_offset`]); within it the send doorbell is
//! 0x800 / 0x900 (the two BlueFlame halves, alternating), the CQ arm doorbell 0x20 and the EQ
//! doorbells 0x40 (update + arm) and 0x48 (update only).
//!
//! ```
//! use rnic_hw_regs::doorbell::{cq_arm_word, eq_doorbell, CqArmCmd, UAR_CQ_ARM, uar_bar_offset};
//!
//! assert_eq!(cq_arm_word(1, CqArmCmd::NextCompletion, 5), 0x1000_0005);
//! assert_eq!(eq_doorbell(0x10, 0x123), 0x1000_0123);
//! assert_eq!(uar_bar_offset(0x10) + UAR_CQ_ARM, 0x1_0020);
//! ```

use crate::status::code_enum;

/// UAR page size (`log_uar_page_sz` = 0: 4 KiB).
pub const UAR_PAGE_SIZE: usize = 4096;
/// UAR offset of the CQ arm doorbell (64-bit write of `{arm word, cqn}`).
pub const UAR_CQ_ARM: usize = 0x20;
/// UAR offset of the EQ doorbell that updates the consumer index and re-arms.
pub const UAR_EQ_UPDATE_ARM: usize = 0x40;
/// UAR offset of the EQ doorbell that only updates the consumer index.
pub const UAR_EQ_UPDATE: usize = 0x48;
/// UAR offset of the first send doorbell / BlueFlame half.
pub const UAR_SEND_DB_0: usize = 0x800;
/// UAR offset of the second send doorbell / BlueFlame half.
pub const UAR_SEND_DB_1: usize = 0x900;
/// Initial arm word of a polled CQ's doorbell record (sn 2, no request).
pub const CQ_ARM_WORD_INIT: u32 = 2 << 28;

/// BAR0 offset of UAR page `index`.
///
/// ```
/// use rnic_hw_regs::doorbell::{uar_bar_offset, UAR_SEND_DB_0};
///
/// assert_eq!(uar_bar_offset(0), 0);
/// assert_eq!(uar_bar_offset(3) + UAR_SEND_DB_0, 0x3800);
/// ```
pub const fn uar_bar_offset(index: u32) -> usize {
    index as usize * UAR_PAGE_SIZE
}

/// UAR offset of the send doorbell for the `n`th doorbell rung on a QP (0x800, 0x900, 0x800,
/// ...): consecutive doorbells alternate BlueFlame halves.
///
/// ```
/// use rnic_hw_regs::doorbell::{send_doorbell_offset, UAR_SEND_DB_0, UAR_SEND_DB_1};
///
/// assert_eq!(send_doorbell_offset(0), UAR_SEND_DB_0);
/// assert_eq!(send_doorbell_offset(1), UAR_SEND_DB_1);
/// assert_eq!(send_doorbell_offset(2), 0x800);
/// ```
pub const fn send_doorbell_offset(n: u64) -> usize {
    if n % 2 == 0 {
        UAR_SEND_DB_0
    } else {
        UAR_SEND_DB_1
    }
}

prm_layout! {
    /// QP doorbell record (8 bytes in host memory): receive counter, then send counter.
    pub struct QpDoorbellRecord("", 8) {
        /// Receive WQE counter (low 16 bits used).
        recv_counter / set_recv_counter: u32 = dw(0x00, 31, 0);
        /// Send WQEBB counter (low 16 bits used).
        send_counter / set_send_counter: u32 = dw(0x04, 31, 0);
    }
}

impl QpDoorbellRecord {
    /// Sets the receive counter to `counter & 0xFFFF`, as the device reads it.
    ///
    /// ```
    /// use rnic_hw_regs::doorbell::QpDoorbellRecord;
    ///
    /// let mut db = QpDoorbellRecord::default();
    /// db.set_recv_head(0x1_0005); // the counter wrapped past 16 bits
    /// assert_eq!(db.recv_counter(), 5);
    /// assert_eq!(db.0[..4], [0, 0, 0, 5]);
    /// ```
    pub fn set_recv_head(&mut self, counter: u32) {
        self.set_recv_counter(counter & 0xFFFF);
    }

    /// Sets the send counter to `counter & 0xFFFF`, as the device reads it.
    ///
    /// ```
    /// use rnic_hw_regs::doorbell::QpDoorbellRecord;
    ///
    /// let mut db = QpDoorbellRecord::default();
    /// db.set_send_head(0x2_0102);
    /// assert_eq!(db.send_counter(), 0x102);
    /// assert_eq!(db.0[4..], [0, 0, 1, 2]);
    /// ```
    pub fn set_send_head(&mut self, counter: u32) {
        self.set_send_counter(counter & 0xFFFF);
    }
}

prm_layout! {
    /// CQ doorbell record (8 bytes in host memory): consumer index, then the arm word.
    pub struct CqDoorbellRecord("", 8) {
        /// Consumer index (`ci & 0xFFFFFF`).
        set_ci / set_set_ci: u32 = dw(0x00, 23, 0);
        /// Arm word (see [`cq_arm_word`]).
        arm / set_arm: u32 = dw(0x04, 31, 0);
    }
}

code_enum! {
    /// CQ arm command (arm word bits 27:24).
    pub enum CqArmCmd: u8 {
        /// Event on the next completion.
        NextCompletion = 0 => "REQUEST_NEXT",
        /// Event on the next solicited completion.
        Solicited = 1 => "REQUEST_SOLICITED",
    }
}

/// The CQ arm word: `(sn & 3) << 28 | cmd << 24 | (ci & 0xFFFFFF)`.
///
/// ```
/// use rnic_hw_regs::doorbell::{cq_arm_word, CqArmCmd};
///
/// assert_eq!(cq_arm_word(2, CqArmCmd::Solicited, 0x10), 0x2100_0010);
/// assert_eq!(cq_arm_word(5, CqArmCmd::NextCompletion, 0x100_0001), 0x1000_0001); // masked
/// ```
pub const fn cq_arm_word(sn: u32, cmd: CqArmCmd, ci: u32) -> u32 {
    (sn & 3) << 28 | (cmd as u32) << 24 | (ci & 0xFF_FFFF)
}

/// A decoded CQ arm word.
///
/// ```
/// use rnic_hw_regs::doorbell::{cq_arm_word, CqArm, CqArmCmd};
///
/// let arm = CqArm::decode(cq_arm_word(3, CqArmCmd::Solicited, 77));
/// assert_eq!(arm, CqArm { sn: 3, cmd: CqArmCmd::Solicited.raw(), ci: 77 });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqArm {
    /// Arm sequence number (2 bits).
    pub sn: u8,
    /// The command, raw (4 bits; see [`CqArmCmd`]).
    pub cmd: u8,
    /// Consumer index (24 bits).
    pub ci: u32,
}

impl CqArm {
    /// Decodes an arm word (device side).
    ///
    /// ```
    /// use rnic_hw_regs::doorbell::CqArm;
    ///
    /// let arm = CqArm::decode(0x2100_0010);
    /// assert_eq!((arm.sn, arm.cmd, arm.ci), (2, 1, 0x10));
    /// ```
    pub const fn decode(word: u32) -> Self {
        Self {
            sn: ((word >> 28) & 3) as u8,
            cmd: ((word >> 24) & 0xF) as u8,
            ci: word & 0xFF_FFFF,
        }
    }
}

/// The 64-bit value written to UAR + [`UAR_CQ_ARM`]: the arm word, then the CQ number.
///
/// ```
/// use rnic_hw_regs::doorbell::{cq_arm_doorbell, cq_arm_word, CqArmCmd};
///
/// let word = cq_arm_word(1, CqArmCmd::NextCompletion, 5);
/// assert_eq!(cq_arm_doorbell(word, 0x42), 0x1000_0005_0000_0042);
/// ```
pub const fn cq_arm_doorbell(arm_word: u32, cqn: u32) -> u64 {
    (arm_word as u64) << 32 | (cqn & 0xFF_FFFF) as u64
}

/// The EQ doorbell value: `eqn << 24 | (ci & 0xFFFFFF)`.
///
/// ```
/// use rnic_hw_regs::doorbell::{eq_doorbell, eq_doorbell_decode};
///
/// let v = eq_doorbell(7, 0x1234);
/// assert_eq!(v, 0x0700_1234);
/// assert_eq!(eq_doorbell_decode(v), (7, 0x1234));
/// ```
pub const fn eq_doorbell(eqn: u8, ci: u32) -> u32 {
    (eqn as u32) << 24 | (ci & 0xFF_FFFF)
}

/// Decodes an EQ doorbell value into `(eqn, ci)` (device side).
///
/// ```
/// use rnic_hw_regs::doorbell::eq_doorbell_decode;
///
/// assert_eq!(eq_doorbell_decode(0x0300_00FF), (3, 0xFF));
/// ```
pub const fn eq_doorbell_decode(value: u32) -> (u8, u32) {
    ((value >> 24) as u8, value & 0xFF_FFFF)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PrmLayout;
    use zerocopy::IntoBytes;

    #[test]
    fn records() {
        assert_eq!((QpDoorbellRecord::SIZE, CqDoorbellRecord::SIZE), (8, 8));
        let mut q = QpDoorbellRecord::default();
        q.set_recv_head(0x1_0005);
        q.set_send_head(0xABCD);
        assert_eq!(q.as_bytes(), &[0, 0, 0, 5, 0, 0, 0xAB, 0xCD]);
        let mut c = CqDoorbellRecord::default();
        c.set_set_ci(0x12_3456);
        c.set_arm(CQ_ARM_WORD_INIT);
        assert_eq!(c.as_bytes(), &[0, 0x12, 0x34, 0x56, 0x20, 0, 0, 0]);
    }

    #[test]
    fn arm_words() {
        let w = cq_arm_word(7, CqArmCmd::Solicited, 0x1FF_FFFF);
        assert_eq!(w, 0x31FF_FFFF);
        assert_eq!(
            CqArm::decode(w),
            CqArm {
                sn: 3,
                cmd: 1,
                ci: 0xFF_FFFF
            }
        );
        assert_eq!(cq_arm_doorbell(w, 0x42), 0x31FF_FFFF_0000_0042);
        assert_eq!(eq_doorbell(0xAB, 0x1234_5678), 0xAB34_5678);
        assert_eq!(eq_doorbell_decode(0xAB34_5678), (0xAB, 0x34_5678));
    }

    #[test]
    fn uar_offsets() {
        assert_eq!(UAR_PAGE_SIZE, 4096);
        assert_eq!(
            (UAR_CQ_ARM, UAR_EQ_UPDATE_ARM, UAR_EQ_UPDATE),
            (0x20, 0x40, 0x48)
        );
        assert_eq!(
            (send_doorbell_offset(0), send_doorbell_offset(1)),
            (0x800, 0x900)
        );
        assert_eq!(send_doorbell_offset(2), 0x800);
        assert_eq!(uar_bar_offset(0x13), 0x13_000);
    }
}
