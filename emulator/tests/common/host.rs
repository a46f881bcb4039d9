//! A test-only host-side command client over [`EmuBus`]: it plays the driver's part of the
//! command interface with hand-built inputs, so tests see exactly what the device answers.
//!
//! - [`Host::new`] creates a deterministic device, allocates the command queue page with
//!   `Bus::alloc_dma` and writes its address (high, then low), which ends `initializing`.
//! - [`Host::exec_raw`] runs one command in slot 0: it builds the entry and a fresh chain of
//!   1 KiB-aligned mailbox blocks with [`cmdq::pack`], rings the doorbell and returns the
//!   [`Reply`] (delivery status, command status, syndrome and the whole output).
//! - [`Host::exec`] does the same for a typed input (`CmdIn`), with optional trailing bytes
//!   (PAS, page lists); [`Host::ok`] also asserts success.
//! - [`Host::bring_up`] runs the whole bring-up (ENABLE_HCA, ISSI, boot pages, caps, init
//!   pages, INIT_HCA, roce_en, UAR, EQ, PD) and returns the numbers the device handed out.
//!
//! Everything here panics on host-side failures (it is test code); the device never should.

use std::ptr::NonNull;

use rnic_emulator::{Device, EmuBus, Profile, RunMode};
use rnic_hw_regs::cmd::{self, CmdIn, op_mod};
use rnic_hw_regs::cmdq::{self, CMD_TYPE_PCIE, CmdMailbox, CmdqEntry, MAILBOX_ALIGN};
use rnic_hw_regs::eqe::EventType;
use rnic_hw_regs::init_seg;
use rnic_hw_regs::status::{CmdStatus, DeliveryStatus};
use rnic_hw_regs::{Bus, DmaRegion};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

/// What the device answered to one command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Reply {
    /// Delivery status (`status_own >> 1`), raw.
    pub(crate) delivery: u8,
    /// Command status (output byte 0), raw.
    pub(crate) status: u8,
    /// Syndrome (output DW@0x04).
    pub(crate) syndrome: u32,
    /// The whole output (inline bytes and mailbox data), `out_len` bytes.
    pub(crate) out: Vec<u8>,
    /// The entry as the device returned it.
    pub(crate) entry: CmdqEntry,
}

impl Reply {
    /// Delivery OK and command status OK.
    pub(crate) fn is_ok(&self) -> bool {
        self.delivery == 0 && self.status == 0
    }

    /// The typed command status (panics on an unknown code: the device must not send one).
    pub(crate) fn cmd_status(&self) -> CmdStatus {
        CmdStatus::try_from(self.status).expect("a PRM command status")
    }

    /// The typed delivery status.
    pub(crate) fn delivery_status(&self) -> DeliveryStatus {
        DeliveryStatus::try_from(self.delivery).expect("a PRM delivery status")
    }

    /// The output read as layout `T` (zero-extended if the output is shorter).
    pub(crate) fn view<T: FromBytes + IntoBytes + zerocopy::KnownLayout + zerocopy::Immutable>(
        &self,
    ) -> T {
        let mut t = T::new_zeroed();
        let b = t.as_mut_bytes();
        let n = b.len().min(self.out.len());
        b[..n].copy_from_slice(&self.out[..n]);
        t
    }

    /// Asserts the command failed with `status` and returns the syndrome.
    #[track_caller]
    pub(crate) fn expect_status(&self, status: CmdStatus) -> u32 {
        assert_eq!(self.delivery, 0, "delivery status");
        assert_eq!(
            self.cmd_status(),
            status,
            "command status (syndrome {:#x})",
            self.syndrome
        );
        assert_ne!(self.syndrome, 0, "a failure carries a syndrome");
        self.syndrome
    }
}

/// Numbers the bring-up got from the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BringUp {
    /// The UAR index from ALLOC_UAR.
    pub(crate) uar: u32,
    /// The EQ from CREATE_EQ (page requests, command completions, async events).
    pub(crate) eqn: u8,
    /// The PD from ALLOC_PD.
    pub(crate) pd: u32,
}

/// The host side of one emulated device.
pub(crate) struct Host {
    /// The device (deterministic, auto-stepping on doorbells).
    pub(crate) dev: Device,
    /// The host's bus handle.
    pub(crate) bus: EmuBus,
    cmdq: DmaRegion,
    token: u8,
    /// Pages given to firmware with MANAGE_PAGES, by IOVA (freed when taken back).
    pub(crate) fw_pages: Vec<DmaRegion>,
    /// Other DMA regions the host allocated (queue buffers), kept alive with the host.
    pub(crate) regions: Vec<DmaRegion>,
    /// Sign entries and input blocks (needed once `cmdif_checksum` is on).
    pub(crate) sign: bool,
}

impl Host {
    /// A deterministic device with `profile` and its command queue set up.
    pub(crate) fn new(profile: Profile) -> Host {
        Host::with_mode(profile, RunMode::Deterministic)
    }

    /// A device running as `mode` with `profile` and its command queue set up. Commands
    /// work in threaded mode too: the host steps the device after each doorbell, which
    /// waits for the device thread if it got there first.
    pub(crate) fn with_mode(profile: Profile, mode: RunMode) -> Host {
        let dev = Device::new(profile, mode);
        let bus = dev.bus();
        let cmdq = bus.alloc_dma(4096).expect("cmdq page");
        bus.write32(init_seg::CMDQ_ADDR_H, (cmdq.iova >> 32) as u32);
        bus.write32(init_seg::CMDQ_ADDR_L_SZ, cmdq.iova as u32 & !0xFFF);
        assert_eq!(
            bus.read32(init_seg::INITIALIZING) >> 31,
            0,
            "firmware ready"
        );
        Host {
            dev,
            bus,
            cmdq,
            token: 0,
            fw_pages: Vec::new(),
            regions: Vec::new(),
            sign: false,
        }
    }

    /// A host for [`Profile::default`].
    pub(crate) fn small() -> Host {
        Host::new(Profile::default())
    }

    /// Allocates a zeroed DMA region the host keeps until it is dropped; returns its IOVA.
    pub(crate) fn alloc(&mut self, len: usize) -> u64 {
        let r = self.bus.alloc_dma(len).expect("alloc_dma");
        let iova = r.iova;
        self.regions.push(r);
        iova
    }

    /// Writes `data` into host DMA memory at `iova` (inside a region from [`Host::alloc`]).
    pub(crate) fn write_mem(&self, iova: u64, data: &[u8]) {
        let r = self
            .regions
            .iter()
            .chain(&self.fw_pages)
            .find(|r| iova >= r.iova && iova + data.len() as u64 <= r.iova + r.len as u64)
            .expect("address inside a host region");
        // SAFETY: the range lies inside a live region this host allocated.
        unsafe {
            let p = r.vaddr.as_ptr().add((iova - r.iova) as usize);
            std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len());
        }
    }

    /// Reads host DMA memory at `iova` (inside a region from [`Host::alloc`]).
    pub(crate) fn read_mem(&self, iova: u64, len: usize) -> Vec<u8> {
        let r = self
            .regions
            .iter()
            .chain(&self.fw_pages)
            .find(|r| iova >= r.iova && iova + len as u64 <= r.iova + r.len as u64)
            .expect("address inside a host region");
        let mut v = vec![0u8; len];
        // SAFETY: as in `write_mem`.
        unsafe {
            let p = r.vaddr.as_ptr().add((iova - r.iova) as usize);
            std::ptr::copy_nonoverlapping(p, v.as_mut_ptr(), len);
        }
        v
    }

    fn next_token(&mut self) -> u8 {
        self.token = self.token.wrapping_add(1).max(1);
        self.token
    }

    /// Runs `input` with an output of `out_len` bytes, with a correct entry and chains.
    pub(crate) fn exec_raw(&mut self, input: &[u8], out_len: usize) -> Reply {
        self.exec_with(input, out_len, |_, _, _| {})
    }

    /// Like [`Host::exec_raw`], but `tweak` may corrupt the entry and the blocks (input
    /// chain first, then output chain) before the doorbell, to test delivery checks.
    pub(crate) fn exec_with(
        &mut self,
        input: &[u8],
        out_len: usize,
        tweak: impl FnOnce(&mut CmdqEntry, &mut [CmdMailbox], &mut [CmdMailbox]),
    ) -> Reply {
        let token = self.next_token();
        let nin = cmdq::blocks_for(input.len());
        let nout = cmdq::blocks_for(out_len);
        let total = nin + nout;
        let mbox = (total > 0).then(|| {
            self.bus
                .alloc_dma(total * MAILBOX_ALIGN)
                .expect("mailbox memory")
        });
        let base = mbox.as_ref().map_or(0, |r| r.iova);
        let addr = |i: usize| base + (i * MAILBOX_ALIGN) as u64;

        let mut entry = CmdqEntry::new_zeroed();
        entry.set_cmd_type(CMD_TYPE_PCIE);
        entry.set_input_length(input.len() as u32);
        entry.set_output_length(out_len as u32);
        entry.set_token(token);
        let mut ins = vec![CmdMailbox::new_zeroed(); nin];
        cmdq::pack(input, &mut entry.input_inline_mut().0, &mut ins, token).expect("pack");
        for (i, b) in ins.iter_mut().enumerate() {
            b.set_next_pointer(if i + 1 < nin { addr(i + 1) } else { 0 });
        }
        let mut outs = vec![CmdMailbox::new_zeroed(); nout];
        for (i, b) in outs.iter_mut().enumerate() {
            b.set_next_pointer(if i + 1 < nout { addr(nin + i + 1) } else { 0 });
        }
        entry.set_input_mailbox_pointer(if nin > 0 { addr(0) } else { 0 });
        entry.set_output_mailbox_pointer(if nout > 0 { addr(nin) } else { 0 });
        entry.set_ownership(true);
        if self.sign {
            ins.iter_mut().for_each(CmdMailbox::sign);
            entry.sign();
        }
        tweak(&mut entry, &mut ins, &mut outs);

        let write = |iova: u64, bytes: &[u8], region: &DmaRegion| {
            // SAFETY: `iova .. + bytes.len()` lies inside `region`, which is live.
            unsafe {
                let p = region.vaddr.as_ptr().add((iova - region.iova) as usize);
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len());
            }
        };
        if let Some(r) = &mbox {
            for (i, b) in ins.iter().chain(&outs).enumerate() {
                write(addr(i), b.as_bytes(), r);
            }
        }
        write(self.cmdq.iova, entry.as_bytes(), &self.cmdq);
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        self.bus.write32(init_seg::CMD_DBELL, 1);
        self.dev.step();

        let read = |iova: u64, len: usize, region: &DmaRegion| {
            let mut v = vec![0u8; len];
            // SAFETY: as for `write`.
            unsafe {
                let p = region.vaddr.as_ptr().add((iova - region.iova) as usize);
                std::ptr::copy_nonoverlapping(p, v.as_mut_ptr(), len);
            }
            v
        };
        let back =
            CmdqEntry::read_from_bytes(&read(self.cmdq.iova, 64, &self.cmdq)).expect("64 bytes");
        assert!(!back.ownership(), "the device handed the entry back");
        let mut out = vec![0u8; out_len];
        let mut blocks = Vec::new();
        if let Some(r) = &mbox {
            for i in 0..nout {
                let b = CmdMailbox::read_from_bytes(&read(addr(nin + i), cmdq::MAILBOX_SIZE, r))
                    .expect("block");
                blocks.push(b);
            }
        }
        let delivery = back.status();
        if delivery == 0 {
            cmdq::gather(&back.output_inline().0, &blocks, token, &mut out)
                .expect("the output chain gathers");
        }
        if let Some(r) = mbox {
            self.bus.free_dma(r).expect("free mailboxes");
        }
        Reply {
            delivery,
            status: back.output_inline().status(),
            syndrome: back.output_inline().syndrome(),
            out,
            entry: back,
        }
    }

    /// Writes `raw` as the slot-0 entry (ownership forced to 1), rings the doorbell and
    /// returns the entry as the device left it: for fuzzing the delivery checks.
    pub(crate) fn exec_entry_raw(&mut self, mut raw: [u8; 64]) -> CmdqEntry {
        raw[63] |= 1;
        // SAFETY: the command queue page is live and 4 KiB long.
        unsafe {
            std::ptr::copy_nonoverlapping(raw.as_ptr(), self.cmdq.vaddr.as_ptr(), 64);
        }
        self.bus.write32(init_seg::CMD_DBELL, 1);
        self.dev.step();
        let mut back = [0u8; 64];
        // SAFETY: as above.
        unsafe {
            std::ptr::copy_nonoverlapping(self.cmdq.vaddr.as_ptr(), back.as_mut_ptr(), 64);
        }
        CmdqEntry::read_from_bytes(&back).expect("64 bytes")
    }

    /// Runs a typed command followed by `extra` input bytes (PAS, page addresses), with the
    /// output length of the command's output layout plus `extra_out`.
    pub(crate) fn exec<C: CmdIn>(&mut self, input: &C, extra: &[u8]) -> Reply {
        self.exec_out(input, extra, <C::Out as rnic_hw_regs::PrmLayout>::SIZE)
    }

    /// Like [`Host::exec`] with an explicit output length.
    pub(crate) fn exec_out<C: CmdIn>(&mut self, input: &C, extra: &[u8], out_len: usize) -> Reply {
        let mut bytes = input.as_bytes().to_vec();
        bytes.extend_from_slice(extra);
        self.exec_raw(&bytes, out_len)
    }

    /// Runs a typed command and asserts it succeeded.
    #[track_caller]
    pub(crate) fn ok<C: CmdIn>(&mut self, input: &C, extra: &[u8]) -> Reply {
        let r = self.exec(input, extra);
        assert!(
            r.is_ok(),
            "{:?} failed: delivery {:#x} status {:#x} syndrome {:#x}",
            C::OPCODE,
            r.delivery,
            r.status,
            r.syndrome
        );
        r
    }

    /// QUERY_PAGES with `mode` (op_mod 1 boot, 2 init, 3 regular): the signed count.
    pub(crate) fn query_pages(&mut self, mode: u16) -> i32 {
        let mut i = cmd::QueryPagesIn::new_cmd();
        i.set_op_mod(mode);
        self.ok(&i, &[])
            .view::<cmd::QueryPagesOut>()
            .num_pages_signed()
    }

    /// Gives `n` fresh 4 KiB pages with MANAGE_PAGES (give); returns the reply.
    pub(crate) fn give_pages(&mut self, n: usize) -> Reply {
        let mut pas = Vec::with_capacity(n * 8);
        let mut pages = Vec::with_capacity(n);
        for _ in 0..n {
            let r = self.bus.alloc_dma(4096).expect("firmware page");
            pas.extend_from_slice(&r.iova.to_be_bytes());
            pages.push(r);
        }
        let mut i = cmd::ManagePagesIn::new_cmd();
        i.set_op_mod(op_mod::MANAGE_PAGES_GIVE);
        i.set_input_num_entries(n as u32);
        let r = self.exec(&i, &pas);
        if r.is_ok() {
            self.fw_pages.extend(pages);
        } else {
            for p in pages {
                self.bus.free_dma(p).expect("free page");
            }
        }
        r
    }

    /// MANAGE_PAGES (take) of up to `n` pages; frees the pages returned. Returns the reply
    /// and the number of pages returned.
    pub(crate) fn take_pages(&mut self, n: usize) -> (Reply, usize) {
        let mut i = cmd::ManagePagesIn::new_cmd();
        i.set_op_mod(op_mod::MANAGE_PAGES_TAKE);
        i.set_input_num_entries(n as u32);
        let r = self.exec_out(&i, &[], cmd::ManagePagesOut::PAS_OFFSET + 8 * n);
        if !r.is_ok() {
            return (r, 0);
        }
        let got = r.view::<cmd::ManagePagesOut>().output_num_entries() as usize;
        for k in 0..got {
            let at = cmd::ManagePagesOut::PAS_OFFSET + 8 * k;
            let iova = u64::from_be_bytes(r.out[at..at + 8].try_into().expect("8 bytes"));
            let pos = self
                .fw_pages
                .iter()
                .position(|p| p.iova == iova)
                .expect("the device returns a page it was given");
            let p = self.fw_pages.swap_remove(pos);
            self.bus.free_dma(p).expect("free page");
        }
        (r, got)
    }

    /// ENABLE_HCA.
    pub(crate) fn enable_hca(&mut self) {
        self.ok(&cmd::EnableHcaIn::new_cmd(), &[]);
    }

    /// QUERY_ISSI, SET_ISSI 1, boot pages, HOST_ENDIANNESS, general caps (current),
    /// init pages, INIT_HCA: the part of the bring-up before any object exists.
    pub(crate) fn init_hca(&mut self) {
        self.enable_hca();
        let issi = self.ok(&cmd::QueryIssiIn::new_cmd(), &[]);
        assert!(issi.view::<cmd::QueryIssiOut>().supports_issi(1));
        let mut s = cmd::SetIssiIn::new_cmd();
        s.set_current_issi(1);
        self.ok(&s, &[]);
        let boot = self.query_pages(op_mod::QUERY_PAGES_BOOT);
        assert!(self.give_pages(boot.max(0) as usize).is_ok());
        let mut reg = cmd::AccessRegisterIn::new_cmd();
        reg.set_register_id(cmd::REG_HOST_ENDIANNESS);
        self.ok(&reg, &[0; 16]);
        let init = self.query_pages(op_mod::QUERY_PAGES_INIT);
        assert!(self.give_pages(init.max(0) as usize).is_ok());
        self.ok(&cmd::InitHcaIn::new_cmd(), &[]);
    }

    /// MODIFY_NIC_VPORT_CONTEXT with roce_en = 1.
    pub(crate) fn enable_roce(&mut self) {
        let mut m = cmd::ModifyNicVportContextIn::new_cmd();
        m.field_select_mut().set_roce_en(true);
        m.nic_vport_context_mut().set_roce_en(true);
        self.ok(&m, &[]);
    }

    /// ALLOC_UAR: the index.
    pub(crate) fn alloc_uar(&mut self) -> u32 {
        self.ok(&cmd::AllocUarIn::new_cmd(), &[])
            .view::<cmd::AllocUarOut>()
            .uar()
    }

    /// ALLOC_PD: the PD number.
    pub(crate) fn alloc_pd(&mut self) -> u32 {
        self.ok(&cmd::AllocPdIn::new_cmd(), &[])
            .view::<cmd::AllocPdOut>()
            .pd()
    }

    /// The CREATE_EQ input for an EQ of `1 << log_size` entries in one fresh page-list
    /// buffer of 4 KiB pages (owner bits initialized to 1), on `uar`, vector `intr`, subscribed to
    /// `events`; returns the input and its PAS bytes.
    pub(crate) fn eq_input(
        &mut self,
        log_size: u8,
        uar: u32,
        intr: u16,
        events: &[u8],
    ) -> (cmd::CreateEqIn, Vec<u8>) {
        let len = 64usize << log_size;
        let (iova, pas) = self.queue_buf(len);
        // Owner bit 1 in every EQE, as drivers initialize them.
        let mut init = vec![0u8; len];
        for e in init.chunks_exact_mut(64) {
            e[63] = 1;
        }
        self.write_mem(iova, &init);
        let mut i = cmd::CreateEqIn::new_cmd();
        let c = i.eq_context_entry_mut();
        c.set_log_eq_size(log_size);
        c.set_uar_page(uar);
        c.set_intr(intr);
        // 4 KiB pages (log_page_size 0), one PAS entry each.
        c.set_log_page_size(0);
        for &t in events {
            i.set_event(t, true);
        }
        (i, pas)
    }

    /// CREATE_EQ (see [`Host::eq_input`]): the EQ number and the buffer's IOVA.
    pub(crate) fn create_eq(
        &mut self,
        log_size: u8,
        uar: u32,
        intr: u16,
        events: &[u8],
    ) -> (u8, u64) {
        let (i, pas) = self.eq_input(log_size, uar, intr, events);
        let iova = u64::from_be_bytes(pas[..8].try_into().expect("8 bytes"));
        let r = self.ok(&i, &pas);
        (r.view::<cmd::CreateEqOut>().eq_number(), iova)
    }

    /// The whole bring-up: [`Host::init_hca`], roce_en, a UAR, one EQ for page requests,
    /// command completions and the async QP/CQ events, and a PD.
    pub(crate) fn bring_up(&mut self) -> BringUp {
        self.init_hca();
        self.enable_roce();
        let uar = self.alloc_uar();
        let events = [
            EventType::PageRequest.raw(),
            EventType::PathMig.raw(),
            EventType::CommEst.raw(),
            EventType::SqDrained.raw(),
            EventType::CqError.raw(),
            EventType::WqCatasError.raw(),
            EventType::PortChange.raw(),
            EventType::WqInvalReqError.raw(),
            EventType::WqAccessError.raw(),
            EventType::SrqLastWqe.raw(),
            EventType::SrqRqLimit.raw(),
        ];
        let (eqn, _) = self.create_eq(7, uar, 0, &events);
        let pd = self.alloc_pd();
        BringUp { uar, eqn, pd }
    }

    /// A zeroed region of `len` bytes for a queue buffer; returns its IOVA and the PAS
    /// (one BE64 per 4 KiB page).
    pub(crate) fn queue_buf(&mut self, len: usize) -> (u64, Vec<u8>) {
        let iova = self.alloc(len.max(1));
        let pages = len.max(1).div_ceil(4096);
        let pas = (0..pages)
            .flat_map(|p| (iova + 4096 * p as u64).to_be_bytes())
            .collect();
        (iova, pas)
    }

    /// Raw access for tests that need a pointer into a region.
    pub(crate) fn region_ptr(&self, iova: u64) -> NonNull<u8> {
        let r = self
            .regions
            .iter()
            .find(|r| iova >= r.iova && iova < r.iova + r.len as u64)
            .expect("address inside a host region");
        // SAFETY: the offset lies inside the region.
        unsafe { NonNull::new_unchecked(r.vaddr.as_ptr().add((iova - r.iova) as usize)) }
    }
}
