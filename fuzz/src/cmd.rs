//! The command interface as a host without a driver sees it: a command queue page and
//! mailbox chains in DMA memory, the doorbell in the initialization segment. The
//! `cmd_mailbox` target and the seed-corpus example share the input format.
//!
//! An input is a sequence of commands, each `in_len: u16 LE, out_len: u16 LE, flags: u8`,
//! then `in_len` bytes of command input (zero-padded when the input ends early). `flags`
//! damages the delivery: see [`Damage`].

use rnic_emulator::{Device, Profile, RunMode};
use rnic_hw_regs::cmdq::{
    CMD_TYPE_PCIE, CMDQ_ENTRY_SIZE, CmdMailbox, CmdqEntry, INLINE_LEN, MAILBOX_ALIGN,
    MAILBOX_DATA_LEN, fill_block, fill_inline,
};
use rnic_hw_regs::status::{CmdStatus, DeliveryStatus};
use rnic_hw_regs::{Bus, DmaRegion, init_seg};
use zerocopy::IntoBytes;

/// Mailbox blocks each direction can have (inputs and outputs longer are cut to this).
pub const MAX_BLOCKS: usize = 24;
/// The longest input or output a command of the fuzz input can ask for.
pub const MAX_LEN: usize = INLINE_LEN + MAX_BLOCKS * MAILBOX_DATA_LEN;
/// Firmware pages the harness has mapped for MANAGE_PAGES.
pub const POOL_PAGES: usize = 8;
/// MANAGE_PAGES (the harness puts its own mapped pages into a give's page list).
const MANAGE_PAGES: u16 = 0x108;
/// The command header's length in a record.
pub const RECORD_HEADER: usize = 5;

/// Delivery damage bits in a record's `flags`.
#[derive(Debug, Clone, Copy)]
pub struct Damage(pub u8);

impl Damage {
    /// The entry's type is not PCIe (7).
    pub const BAD_TYPE: u8 = 1;
    /// The last input block carries a different token.
    pub const BAD_TOKEN: u8 = 2;
    /// Block numbers start at 1, not 0.
    pub const BAD_BLOCK_NUMBER: u8 = 4;
    /// The output chain pointer is an address nothing maps.
    pub const UNMAPPED_OUTPUT: u8 = 8;
    /// The input chain pointer is not 1 KiB aligned.
    pub const UNALIGNED_INPUT: u8 = 16;
    /// The input chain is one block short.
    pub const SHORT_CHAIN: u8 = 32;

    fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }
}

/// A fresh deterministic device (a small profile: one boot page, one init page, so the
/// fuzzer's MANAGE_PAGES can satisfy it) and the host's command queue, not yet handed to
/// the device.
pub struct CmdHost {
    /// The device.
    pub dev: Device,
    bus: rnic_emulator::EmuBus,
    page: DmaRegion,
    inbox: DmaRegion,
    outbox: DmaRegion,
    pool: DmaRegion,
    token: u8,
}

/// The device profile of the command target: the default, asking for one boot page and
/// one init page.
pub fn profile() -> Profile {
    Profile {
        boot_pages: 1,
        init_pages: 1,
        regular_pages: 0,
        ..Profile::default()
    }
}

/// What the device answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// A delivery failure (nothing ran).
    Delivery(DeliveryStatus),
    /// Delivered; the command's status.
    Status(CmdStatus),
}

fn write(region: &DmaRegion, off: usize, bytes: &[u8]) {
    assert!(off + bytes.len() <= region.len);
    // SAFETY: inside the live region (checked above); the device does not run meanwhile.
    unsafe {
        core::ptr::copy_nonoverlapping(bytes.as_ptr(), region.vaddr.as_ptr().add(off), bytes.len())
    };
}

fn read(region: &DmaRegion, off: usize, out: &mut [u8]) {
    assert!(off + out.len() <= region.len);
    // SAFETY: as in `write`.
    unsafe {
        core::ptr::copy_nonoverlapping(region.vaddr.as_ptr().add(off), out.as_mut_ptr(), out.len())
    };
}

/// Writes a chain of `n` mailbox blocks, 1 KiB apart from the start of `region`, each
/// filled by `fill(index, block)`, linked by `next_pointer` and signed.
fn write_chain(region: &DmaRegion, n: usize, mut fill: impl FnMut(usize, &mut CmdMailbox)) {
    for i in 0..n {
        let mut b = CmdMailbox::default();
        fill(i, &mut b);
        let next = if i + 1 < n {
            region.iova + ((i + 1) * MAILBOX_ALIGN) as u64
        } else {
            0
        };
        b.set_next_pointer(next);
        b.sign();
        write(region, i * MAILBOX_ALIGN, b.as_bytes());
    }
}

impl CmdHost {
    /// A fresh device with the command queue page programmed.
    pub fn new() -> Self {
        let dev = Device::new(profile(), RunMode::Deterministic);
        let bus = dev.bus();
        let page = bus.alloc_dma(4096).expect("cmdq page");
        let inbox = bus
            .alloc_dma(MAX_BLOCKS * MAILBOX_ALIGN)
            .expect("input mailboxes");
        let outbox = bus
            .alloc_dma(MAX_BLOCKS * MAILBOX_ALIGN)
            .expect("output mailboxes");
        let pool = bus.alloc_dma(POOL_PAGES * 4096).expect("firmware pages");
        let host = CmdHost {
            dev,
            bus,
            page,
            inbox,
            outbox,
            pool,
            token: 0,
        };
        host.program_cmdq();
        host
    }

    /// Tells the device where the command queue page is (what a driver does first).
    fn program_cmdq(&self) {
        let (hi, lo) = init_seg::cmdq_addr_words(self.page.iova).expect("4 KiB aligned");
        self.bus.write32(init_seg::CMDQ_ADDR_H, hi);
        self.bus.write32(
            init_seg::CMDQ_ADDR_L_SZ,
            init_seg::CmdqAddrLSz::for_write(lo, init_seg::NicInterface::FullDriver).0,
        );
    }

    /// The device as it comes out of a function-level reset (`Device::function_reset`: the
    /// firmware's state back to power-on, the host's DMA mappings kept, as a PCIe FLR
    /// leaves the IOMMU alone) with the command queue page programmed again: a fresh
    /// device for the next input at a fraction of the cost of building one. A device the
    /// reset cannot reach (its link dead) is replaced by a new one.
    pub fn reset(&mut self) {
        self.token = 0;
        if self.dev.function_reset().is_err() {
            *self = CmdHost::new();
            return;
        }
        // What earlier inputs left in host memory (an unaligned chain pointer reads it)
        // must not change what this one does.
        for r in [&self.page, &self.inbox, &self.outbox, &self.pool] {
            // SAFETY: the whole live region; the device does not run meanwhile.
            unsafe { core::ptr::write_bytes(r.vaddr.as_ptr(), 0, r.len) };
        }
        self.program_cmdq();
    }

    /// Runs one command through slot 0 and returns the device's answer. Panics (the fuzz
    /// finding) when the device keeps the entry or answers with a status the PRM does not
    /// define.
    pub fn exec(&mut self, input: &[u8], out_len: usize, damage: Damage) -> Answer {
        let mut input = input.to_vec();
        self.give_own_pages(&mut input);
        self.token = self.token.wrapping_add(1).max(1);
        let token = self.token;
        let mut e = CmdqEntry::default();
        e.set_cmd_type(if damage.has(Damage::BAD_TYPE) {
            0
        } else {
            CMD_TYPE_PCIE
        });
        e.set_input_length(input.len() as u32);
        e.set_output_length(out_len as u32);
        e.set_token(token);
        let mut inline = [0u8; INLINE_LEN];
        fill_inline(&input, &mut inline);
        e.input_inline_mut().as_mut_bytes().copy_from_slice(&inline);
        // Input chain.
        let n_in = rnic_hw_regs::cmdq::blocks_for(input.len()).min(MAX_BLOCKS);
        let chain_in = if damage.has(Damage::SHORT_CHAIN) {
            n_in.saturating_sub(1)
        } else {
            n_in
        };
        write_chain(&self.inbox, chain_in, |i, b| {
            fill_block(&input, i, token, b).expect("index in range");
            if damage.has(Damage::BAD_BLOCK_NUMBER) {
                b.set_block_number(i as u32 + 1);
            }
            if damage.has(Damage::BAD_TOKEN) && i + 1 == chain_in {
                b.set_token(token ^ 0x80);
            }
        });
        if n_in > 0 {
            let off = if damage.has(Damage::UNALIGNED_INPUT) {
                0x40
            } else {
                0
            };
            e.set_input_mailbox_pointer(self.inbox.iova + off);
        }
        // Output chain (zeroed blocks, the device fills them).
        let n_out = rnic_hw_regs::cmdq::blocks_for(out_len).min(MAX_BLOCKS);
        write_chain(&self.outbox, n_out, |i, b| {
            b.set_block_number(i as u32);
            b.set_token(token);
        });
        if n_out > 0 {
            e.set_output_mailbox_pointer(if damage.has(Damage::UNMAPPED_OUTPUT) {
                0xDEAD_0000_0000
            } else {
                self.outbox.iova
            });
        }
        e.sign();
        e.set_ownership(true);
        write(&self.page, 0, e.as_bytes());
        // A deterministic device runs the command before the doorbell write returns.
        self.bus.write32(init_seg::CMD_DBELL, 1);
        self.dev.step();
        let mut back = [0u8; CMDQ_ENTRY_SIZE];
        read(&self.page, 0, &mut back);
        let back: CmdqEntry = zerocopy::transmute!(back);
        assert!(
            !back.ownership(),
            "the device kept the command entry: {back:?}"
        );
        let delivery = back
            .delivery_status()
            .unwrap_or_else(|e| panic!("delivery status the PRM does not define: {e:?}"));
        if delivery != DeliveryStatus::Ok {
            return Answer::Delivery(delivery);
        }
        let status = back.output_inline().status();
        Answer::Status(
            CmdStatus::try_from(status)
                .unwrap_or_else(|_| panic!("command status the PRM does not define: {status:#x}")),
        )
    }

    /// MANAGE_PAGES gives: the page list names the harness's mapped pages (the fuzzer cannot
    /// know bus addresses), as many as the command lists.
    fn give_own_pages(&self, input: &mut [u8]) {
        if input.len() < 16 || u16::from_be_bytes([input[0], input[1]]) != MANAGE_PAGES {
            return;
        }
        for (i, pa) in input[16..].chunks_exact_mut(8).enumerate() {
            let iova = self.pool.iova + ((i % POOL_PAGES) * 4096) as u64;
            pa.copy_from_slice(&iova.to_be_bytes());
        }
    }

    /// Runs every command record of `data` (see the module's documentation); returns the
    /// answers.
    pub fn run(&mut self, mut data: &[u8]) -> Vec<Answer> {
        let mut answers = Vec::new();
        while data.len() >= RECORD_HEADER {
            let in_len = usize::from(u16::from_le_bytes([data[0], data[1]])).min(MAX_LEN);
            let out_len = usize::from(u16::from_le_bytes([data[2], data[3]])).min(MAX_LEN);
            let damage = Damage(data[4]);
            data = &data[RECORD_HEADER..];
            let n = in_len.min(data.len());
            let mut input = data[..n].to_vec();
            input.resize(in_len, 0);
            data = &data[n..];
            answers.push(self.exec(&input, out_len, damage));
        }
        answers
    }
}

impl Default for CmdHost {
    fn default() -> Self {
        Self::new()
    }
}

/// Encodes one command record of the `cmd_mailbox` input format.
pub fn record(input: &[u8], out_len: usize, flags: u8) -> Vec<u8> {
    let mut r = Vec::with_capacity(RECORD_HEADER + input.len());
    r.extend_from_slice(&(input.len().min(MAX_LEN) as u16).to_le_bytes());
    r.extend_from_slice(&(out_len.min(MAX_LEN) as u16).to_le_bytes());
    r.push(flags);
    r.extend_from_slice(&input[..input.len().min(MAX_LEN)]);
    r
}
