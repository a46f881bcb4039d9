//! The command interface client: the command queue page, its slots, tokens, mailbox chains,
//! the doorbell, polling with a timeout, and typed errors.
//!
//! One 4 KiB DMA page holds `2^log_cmdq_size` entries, `2^log_cmdq_stride` bytes apart (both
//! read from the init segment). Regular commands use slots `0..n-1`; the last slot is kept for
//! the page commands (MANAGE_PAGES on behalf of page-request events), as the Linux driver does,
//! so that a page request can always be served while regular commands wait for firmware.
//!
//! Executing a command (PRM "Executing a command"):
//! 1. the input is packed into the entry's 16 inline bytes and a chain of 1 KiB-aligned
//!    mailbox blocks (from a pool of DMA pages, so steady-state commands allocate no DMA
//!    memory); output blocks are chained, numbered and tokened too;
//! 2. the entry gets type 7, lengths, pointers, a non-zero token (one counter, incremented per
//!    command), owner = 1 and its signature (as the kernel signs it; block signatures stay 0
//!    because `cmdif_checksum` is 0);
//! 3. a release fence, then `1 << slot` to the command doorbell (BAR0 0x18);
//! 4. the owner bit is polled until the device clears it (or the timeout, default 60 s);
//! 5. an acquire fence, then the delivery status, the output (validated: block numbers and
//!    tokens), the command status and syndrome.
//!
//! At `trace` log level every entry and mailbox is logged in the kernel's `dump_command` format
//! (see [`crate::trace`]).

use crate::dma;
use crate::error::DriverError;
use crate::health::{self, FatalReason, FatalState, HealthRegisters};
use crate::trace::{self, DumpDirection};
use rnic_hw_regs::cmd::{CmdHdrIn, CmdIn, CmdOpcode};
use rnic_hw_regs::cmdq::{
    self as layout, CMD_TYPE_PCIE, CMDQ_ENTRY_SIZE, CmdMailbox, CmdqEntry, INLINE_LEN,
    MAILBOX_ALIGN, MAILBOX_SIZE,
};
use rnic_hw_regs::init_seg;
use rnic_hw_regs::status::{CmdStatus, DeliveryStatus};
use rnic_hw_regs::{Bus, DmaRegion, PrmLayout};
use std::sync::atomic::{AtomicBool, Ordering, fence};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

/// Default command timeout (the kernel's and rdma-core's 60 s).
pub const DEFAULT_CMD_TIMEOUT: Duration = Duration::from_secs(60);

/// Bytes of DMA memory per mailbox pool page.
const POOL_PAGE: usize = 4096;
/// Mailbox blocks per pool page (1 KiB aligned).
const BLOCKS_PER_PAGE: usize = POOL_PAGE / MAILBOX_ALIGN;
/// The smallest output length the driver asks for: the 16 inline bytes (the kernel of the
/// ConnectX-4 trace asks for 16 bytes even for ENABLE_HCA's 0xC-byte output).
const MIN_OUT_LEN: usize = INLINE_LEN;

/// Which slot class a command uses.
///
/// ```
/// use rnic_driver::cmdq::SlotClass;
/// use rnic_hw_regs::cmd::QuerySpecialContextsIn;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
/// // The page slot is kept for MANAGE_PAGES, but takes any command.
/// let out = hca.cmdq().exec_class(&QuerySpecialContextsIn::new_cmd(), &[], &mut [], SlotClass::Pages)?;
/// assert_eq!(out.resd_lkey(), hca.special_contexts().resd_lkey);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotClass {
    /// Slots `0..n-1`.
    Regular,
    /// The last slot, kept for page commands.
    Pages,
}

/// What the driver sent and the device returned for one command, for observers.
///
/// ```
/// use rnic_driver::cmdq::{CommandObserver, CommandRecord};
/// use rnic_hw_regs::cmd::CmdOpcode;
/// use std::sync::{Arc, Mutex};
///
/// #[derive(Default)]
/// struct Opcodes(Mutex<Vec<CmdOpcode>>);
/// impl CommandObserver for Opcodes {
///     fn on_command(&self, r: &CommandRecord<'_>) {
///         assert!(r.output.is_some()); // every bring-up command was answered
///         self.0.lock().unwrap().push(r.opcode);
///     }
/// }
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// let seen = Arc::new(Opcodes::default());
/// let cfg = rnic_driver::HcaConfig { observer: Some(seen.clone()), ..Default::default() };
/// let _hca = rnic_driver::Hca::open(Arc::new(dev.bus()), cfg)?;
/// assert_eq!(seen.0.lock().unwrap()[0], CmdOpcode::EnableHca);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct CommandRecord<'a> {
    /// The opcode.
    pub opcode: CmdOpcode,
    /// The slot the command used.
    pub slot: u8,
    /// The entry as the driver wrote it (owner 1, signed).
    pub entry_in: &'a [u8; CMDQ_ENTRY_SIZE],
    /// The whole command input.
    pub input: &'a [u8],
    /// The entry as the device returned it (`None` if it never did).
    pub entry_out: Option<&'a [u8; CMDQ_ENTRY_SIZE]>,
    /// The whole command output (`None` if it was not delivered).
    pub output: Option<&'a [u8]>,
}

/// Sees every command the queue executes (after it completes or fails). Tests use it to
/// compare the driver's inputs with a kernel trace.
///
/// ```
/// use rnic_driver::cmdq::CommandRecorder;
/// use rnic_hw_regs::cmd::CmdOpcode;
/// use std::sync::Arc;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
///
/// let rec = Arc::new(CommandRecorder::default()); // an observer that keeps everything
/// let cfg = rnic_driver::HcaConfig { observer: Some(rec.clone()), ..Default::default() };
/// let hca = rnic_driver::Hca::open(Arc::new(dev.bus()), cfg)?;
/// hca.close()?;
/// let ops: Vec<CmdOpcode> = rec.take().iter().map(|c| c.opcode).collect();
/// assert_eq!((ops[0], ops[ops.len() - 1]), (CmdOpcode::EnableHca, CmdOpcode::DisableHca));
/// # Ok(()) }
/// ```
pub trait CommandObserver: Send + Sync {
    /// Called once per command, from the thread that executed it.
    fn on_command(&self, record: &CommandRecord<'_>);
}

/// An owned copy of a [`CommandRecord`].
///
/// ```
/// use rnic_driver::cmdq::CommandRecorder;
/// use std::sync::Arc;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// let rec = Arc::new(CommandRecorder::default());
/// let cfg = rnic_driver::HcaConfig { observer: Some(rec.clone()), ..Default::default() };
/// let _hca = rnic_driver::Hca::open(Arc::new(dev.bus()), cfg)?;
/// let first = &rec.take()[0]; // ENABLE_HCA
/// assert_eq!(first.entry_in[0], 7); // command type: PCIe command interface
/// assert_eq!(first.output.as_ref().map(|o| o[0]), Some(0)); // status OK
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedCommand {
    /// The opcode.
    pub opcode: CmdOpcode,
    /// The slot the command used.
    pub slot: u8,
    /// The entry as the driver wrote it.
    pub entry_in: [u8; CMDQ_ENTRY_SIZE],
    /// The whole input.
    pub input: Vec<u8>,
    /// The entry as the device returned it.
    pub entry_out: Option<[u8; CMDQ_ENTRY_SIZE]>,
    /// The whole output.
    pub output: Option<Vec<u8>>,
}

/// A [`CommandObserver`] that keeps every command.
///
/// ```
/// use rnic_driver::cmdq::CommandRecorder;
///
/// let rec = CommandRecorder::default();
/// assert!(rec.take().is_empty());
/// ```
#[derive(Debug, Default)]
pub struct CommandRecorder {
    commands: Mutex<Vec<RecordedCommand>>,
}

impl CommandRecorder {
    /// Takes the commands recorded so far.
    ///
    /// ```
    /// use rnic_driver::cmdq::CommandRecorder;
    /// use std::sync::Arc;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// let rec = Arc::new(CommandRecorder::default());
    /// let cfg = rnic_driver::HcaConfig { observer: Some(rec.clone()), ..Default::default() };
    /// let hca = rnic_driver::Hca::open(Arc::new(dev.bus()), cfg)?;
    /// assert!(!rec.take().is_empty());
    /// hca.check_health()?; // no command
    /// assert!(rec.take().is_empty()); // taken already
    /// # Ok(()) }
    /// ```
    pub fn take(&self) -> Vec<RecordedCommand> {
        std::mem::take(&mut *self.commands.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl CommandObserver for CommandRecorder {
    fn on_command(&self, r: &CommandRecord<'_>) {
        let rec = RecordedCommand {
            opcode: r.opcode,
            slot: r.slot,
            entry_in: *r.entry_in,
            input: r.input.to_vec(),
            entry_out: r.entry_out.copied(),
            output: r.output.map(<[u8]>::to_vec),
        };
        self.commands
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(rec);
    }
}

/// A mailbox block in the pool: page index and 1 KiB sub-block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BlockRef {
    page: u32,
    sub: u8,
}

/// Mutable state of the queue.
#[derive(Debug)]
struct State {
    /// Next token to hand out (never 0).
    last_token: u8,
    /// Bit n set: slot n is in use.
    busy: u32,
    /// Bit n set: slot n timed out and is never reused.
    leaked: u32,
    /// Pool pages (4 KiB each, 4 blocks per page).
    pages: Vec<DmaRegion>,
    /// Free blocks.
    free: Vec<BlockRef>,
    /// Set when the queue is shutting down.
    closed: bool,
}

/// The command queue client.
///
/// ```
/// use rnic_hw_regs::cmd::QueryPagesIn;
/// use rnic_hw_regs::cmd::op_mod::QUERY_PAGES_REGULAR;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
/// let mut q = QueryPagesIn::new_cmd();
/// q.set_op_mod(QUERY_PAGES_REGULAR);
/// let out = hca.cmdq().exec(&q, &[], &mut [])?; // typed input, typed output
/// assert_eq!(out.num_pages_signed(), 0); // bring-up gave every page firmware wanted
/// # Ok(()) }
/// ```
pub struct CmdQueue {
    bus: Arc<dyn Bus>,
    page: Option<DmaRegion>,
    log_size: u8,
    log_stride: u8,
    timeout: Duration,
    state: Mutex<State>,
    slot_freed: Condvar,
    observer: Option<Arc<dyn CommandObserver>>,
    /// The device may still write the queue: never free its DMA memory.
    unresponsive: AtomicBool,
    /// Called about every millisecond while a regular command waits.
    idle_hook: Mutex<Option<IdleHook>>,
    /// Set once the device is declared dead: commands then fail at once.
    fatal: FatalState,
}

/// Work to do while a regular command waits for the device (the HCA serves page requests in
/// it, through the page slot).
///
/// ```
/// use rnic_driver::cmdq::{CmdQueue, IdleHook};
/// use std::sync::Arc;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
/// # let bus: std::sync::Arc<dyn rnic_hw_regs::Bus> = std::sync::Arc::new(dev.bus());
/// # let reg = bus.read32(rnic_hw_regs::init_seg::CMDQ_ADDR_L_SZ);
/// # let mut q = rnic_driver::cmdq::CmdQueue::new(bus.clone(), reg, std::time::Duration::from_secs(1), None)?;
/// let hook: IdleHook = Arc::new(|q: &CmdQueue| assert!(q.slots() > 1));
/// q.set_idle_hook(Some(hook)); // (an HCA's queue has one already: it serves page requests)
/// # Ok(()) }
/// ```
pub type IdleHook = Arc<dyn Fn(&CmdQueue) + Send + Sync>;

impl std::fmt::Debug for CmdQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmdQueue")
            .field("iova", &self.page.as_ref().map(|p| p.iova))
            .field("log_size", &self.log_size)
            .field("log_stride", &self.log_stride)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// The result of the low-level execution: the output bytes or why there are none.
struct Completion {
    entry_out: [u8; CMDQ_ENTRY_SIZE],
}

impl CmdQueue {
    /// Allocates the command queue page for a device whose `cmdq_addr_l_sz` register reads
    /// `cmdq_addr_l_sz` (geometry from its low bits). The caller writes the page's IOVA to
    /// the init segment ([`CmdQueue::iova`]).
    ///
    /// ```
    /// use rnic_driver::{cmdq::CmdQueue, DriverError};
    /// use rnic_hw_regs::init_seg::CMDQ_ADDR_L_SZ;
    /// use std::{sync::Arc, time::Duration};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// let bus: Arc<dyn rnic_hw_regs::Bus> = Arc::new(dev.bus());
    /// let q = CmdQueue::new(bus.clone(), bus.read32(CMDQ_ADDR_L_SZ), Duration::from_secs(60), None)?;
    /// assert_eq!(q.iova() % 4096, 0); // to be written to the init segment
    /// let bad = CmdQueue::new(bus, 0, Duration::from_secs(60), None); // a queue of one slot
    /// assert!(matches!(bad, Err(DriverError::CmdqGeometry { .. })));
    /// # Ok(()) }
    /// ```
    pub fn new(
        bus: Arc<dyn Bus>,
        cmdq_addr_l_sz: u32,
        timeout: Duration,
        observer: Option<Arc<dyn CommandObserver>>,
    ) -> Result<Self, DriverError> {
        let reg = init_seg::CmdqAddrLSz(cmdq_addr_l_sz);
        let (log_size, log_stride) = (reg.log_cmdq_size(), reg.log_cmdq_stride());
        // At least two slots: one regular, one for page commands.
        if !reg.geometry_ok() || log_size < 1 {
            return Err(DriverError::CmdqGeometry {
                log_size,
                log_stride,
            });
        }
        let page = bus.alloc_dma(POOL_PAGE)?;
        if page.iova & 0xFFF != 0 || page.len < POOL_PAGE {
            let _ = bus.free_dma(page);
            return Err(DriverError::Bus(rnic_hw_regs::BusError::InvalidArgument));
        }
        dma::fill(&page, 0, POOL_PAGE, 0);
        Ok(Self {
            bus,
            page: Some(page),
            log_size,
            log_stride,
            timeout,
            state: Mutex::new(State {
                last_token: 0,
                busy: 0,
                leaked: 0,
                pages: Vec::new(),
                free: Vec::new(),
                closed: false,
            }),
            slot_freed: Condvar::new(),
            observer,
            unresponsive: AtomicBool::new(false),
            idle_hook: Mutex::new(None),
            fatal: FatalState::default(),
        })
    }

    /// Bus address of the command queue page.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let bus: std::sync::Arc<dyn rnic_hw_regs::Bus> = std::sync::Arc::new(dev.bus());
    /// # let reg = bus.read32(rnic_hw_regs::init_seg::CMDQ_ADDR_L_SZ);
    /// # let mut q = rnic_driver::cmdq::CmdQueue::new(bus.clone(), reg, std::time::Duration::from_secs(1), None)?;
    /// assert_ne!(q.iova(), 0);
    /// # Ok(()) }
    /// ```
    pub fn iova(&self) -> u64 {
        self.page.as_ref().map_or(0, |p| p.iova)
    }

    /// Number of slots (`2^log_cmdq_size`).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let bus: std::sync::Arc<dyn rnic_hw_regs::Bus> = std::sync::Arc::new(dev.bus());
    /// # let reg = bus.read32(rnic_hw_regs::init_seg::CMDQ_ADDR_L_SZ);
    /// # let mut q = rnic_driver::cmdq::CmdQueue::new(bus.clone(), reg, std::time::Duration::from_secs(1), None)?;
    /// assert!(q.slots().is_power_of_two());
    /// # Ok(()) }
    /// ```
    pub fn slots(&self) -> u8 {
        1 << self.log_size
    }

    /// The slot kept for page commands (the last one).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let bus: std::sync::Arc<dyn rnic_hw_regs::Bus> = std::sync::Arc::new(dev.bus());
    /// # let reg = bus.read32(rnic_hw_regs::init_seg::CMDQ_ADDR_L_SZ);
    /// # let mut q = rnic_driver::cmdq::CmdQueue::new(bus.clone(), reg, std::time::Duration::from_secs(1), None)?;
    /// assert_eq!(q.page_slot(), q.slots() - 1);
    /// # Ok(()) }
    /// ```
    pub fn page_slot(&self) -> u8 {
        self.slots() - 1
    }

    /// The command timeout.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let bus: std::sync::Arc<dyn rnic_hw_regs::Bus> = std::sync::Arc::new(dev.bus());
    /// # let reg = bus.read32(rnic_hw_regs::init_seg::CMDQ_ADDR_L_SZ);
    /// # let mut q = rnic_driver::cmdq::CmdQueue::new(bus.clone(), reg, std::time::Duration::from_secs(1), None)?;
    /// assert_eq!(q.timeout(), std::time::Duration::from_secs(1));
    /// # Ok(()) }
    /// ```
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Number of mailbox blocks the pool holds (free or in use).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let bus: std::sync::Arc<dyn rnic_hw_regs::Bus> = std::sync::Arc::new(dev.bus());
    /// # let reg = bus.read32(rnic_hw_regs::init_seg::CMDQ_ADDR_L_SZ);
    /// # let mut q = rnic_driver::cmdq::CmdQueue::new(bus.clone(), reg, std::time::Duration::from_secs(1), None)?;
    /// assert_eq!(q.pool_blocks(), 0); // mailbox pages come with the first long command
    /// # Ok(()) }
    /// ```
    pub fn pool_blocks(&self) -> usize {
        self.lock().pages.len() * BLOCKS_PER_PAGE
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Executes a typed command: `input` followed by `extra_in` (a PAS list, register data,
    /// ...), with an output of `I::Out` followed by `extra_out.len()` more bytes, which are
    /// copied into `extra_out`. Regular slot.
    ///
    /// ```
    /// use rnic_hw_regs::cmd::{AllocPdIn, DeallocPdIn};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let pd = hca.cmdq().exec(&AllocPdIn::new_cmd(), &[], &mut [])?.pd();
    /// let mut dealloc = DeallocPdIn::new_cmd();
    /// dealloc.set_pd(pd);
    /// hca.cmdq().exec(&dealloc, &[], &mut [])?;
    /// assert!(hca.cmdq().exec(&dealloc, &[], &mut []).is_err()); // freed already
    /// # Ok(()) }
    /// ```
    pub fn exec<I: CmdIn>(
        &self,
        input: &I,
        extra_in: &[u8],
        extra_out: &mut [u8],
    ) -> Result<I::Out, DriverError> {
        self.exec_class(input, extra_in, extra_out, SlotClass::Regular)
    }

    /// Declares the device dead (a health check or a command found it fatal): every later
    /// command fails at once with [`DriverError::DeviceFatal`], and the HCA's objects flush
    /// their work requests. True the first time.
    ///
    /// ```
    /// use rnic_driver::health::FatalReason;
    /// use rnic_driver::DriverError;
    /// use rnic_hw_regs::cmd::QuerySpecialContextsIn;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?;
    /// assert!(hca.cmdq().declare_fatal(FatalReason::PciLinkDead));
    /// assert!(!hca.cmdq().declare_fatal(FatalReason::PciLinkDead)); // once
    /// let r = hca.cmdq().exec(&QuerySpecialContextsIn::new_cmd(), &[], &mut []);
    /// assert!(matches!(r, Err(DriverError::DeviceFatal { reason: FatalReason::PciLinkDead })));
    /// # Ok(()) }
    /// ```
    pub fn declare_fatal(&self, reason: FatalReason) -> bool {
        let first = self.fatal.declare(reason);
        if first {
            log::error!("device declared dead: {reason}");
        }
        first
    }

    /// Why the device was declared dead, `None` while it is alive.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?;
    /// assert_eq!(hca.cmdq().fatal_reason(), None);
    /// # Ok(()) }
    /// ```
    pub fn fatal_reason(&self) -> Option<FatalReason> {
        if self.fatal.is_dead() {
            self.fatal.reason()
        } else {
            None
        }
    }

    /// Whether the device was declared dead: one relaxed load, for the data path.
    #[inline(always)]
    pub(crate) fn is_dead(&self) -> bool {
        self.fatal.is_dead()
    }

    /// Like [`CmdQueue::exec`], in the slot class given.
    ///
    /// ```
    /// use rnic_driver::cmdq::SlotClass;
    /// use rnic_hw_regs::cmd::QuerySpecialContextsIn;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let out = hca.cmdq().exec_class(&QuerySpecialContextsIn::new_cmd(), &[], &mut [], SlotClass::Regular)?;
    /// assert_eq!(out.resd_lkey(), hca.special_contexts().resd_lkey);
    /// # Ok(()) }
    /// ```
    pub fn exec_class<I: CmdIn>(
        &self,
        input: &I,
        extra_in: &[u8],
        extra_out: &mut [u8],
        class: SlotClass,
    ) -> Result<I::Out, DriverError> {
        let mut inbuf = Vec::with_capacity(I::SIZE + extra_in.len());
        inbuf.extend_from_slice(input.as_bytes());
        inbuf.extend_from_slice(extra_in);
        let fixed_out = <I::Out as PrmLayout>::SIZE;
        // The extra output follows the fixed part; the whole is at least the 16 inline bytes.
        let mut outbuf = vec![0u8; (fixed_out + extra_out.len()).max(MIN_OUT_LEN)];
        self.exec_raw(&inbuf, &mut outbuf, class)?;
        let out =
            I::Out::read_from_bytes(&outbuf[..fixed_out]).map_err(|_| DriverError::BadOutput {
                opcode: I::OPCODE,
                what: "output shorter than its layout".into(),
            })?;
        let extra_at = fixed_out;
        if let Some(src) = outbuf.get(extra_at..extra_at + extra_out.len()) {
            extra_out.copy_from_slice(src);
        }
        Ok(out)
    }

    /// Executes a command given as raw bytes: `input` (at least the 8-byte header, a PRM
    /// opcode) and an output buffer of the length to ask for (at least 8 bytes). On success
    /// the whole output is in `output` and its status is OK.
    ///
    /// ```
    /// use rnic_driver::cmdq::SlotClass;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let hca = std::sync::Arc::new(rnic_driver::Hca::open(std::sync::Arc::new(dev.bus()), Default::default())?);
    /// let mut input = [0u8; 16];
    /// input[..2].copy_from_slice(&0x203u16.to_be_bytes()); // QUERY_SPECIAL_CONTEXTS
    /// let mut output = [0u8; 0x20]; // query_special_contexts_out
    /// hca.cmdq().exec_raw(&input, &mut output, SlotClass::Regular)?;
    /// assert_eq!(output[0], 0); // status OK
    /// assert_eq!(u32::from_be_bytes(output[12..16].try_into()?), hca.special_contexts().resd_lkey);
    /// # Ok(()) }
    /// ```
    pub fn exec_raw(
        &self,
        input: &[u8],
        output: &mut [u8],
        class: SlotClass,
    ) -> Result<(), DriverError> {
        if let Some(reason) = self.fatal_reason() {
            return Err(DriverError::DeviceFatal { reason });
        }
        let hdr = CmdHdrIn::ref_from_prefix(input)
            .map(|(h, _)| h)
            .map_err(|_| {
                DriverError::InvalidArgument("command input shorter than 8 bytes".into())
            })?;
        let opcode =
            CmdOpcode::try_from(hdr.opcode()).map_err(|e| DriverError::UnknownOpcode(e.0))?;
        let op_mod = hdr.op_mod();
        if output.len() < 8 {
            return Err(DriverError::InvalidArgument(format!(
                "{opcode}: output buffer of {} bytes, need at least 8",
                output.len()
            )));
        }
        let in_len = u32::try_from(input.len())
            .map_err(|_| DriverError::InvalidArgument("input too long".into()))?;
        let out_len = u32::try_from(output.len())
            .map_err(|_| DriverError::InvalidArgument("output too long".into()))?;

        let n_in = layout::blocks_for(input.len());
        let n_out = layout::blocks_for(output.len());
        let (slot, token, blocks) = self.acquire(class, n_in + n_out)?;
        let (in_blocks, out_blocks) = blocks.split_at(n_in);
        let tracing = log::log_enabled!(target: trace::TRACE_TARGET, log::Level::Trace);

        // 1. Mailboxes.
        let mut in_dump = Vec::new();
        let mut block = CmdMailbox::new_zeroed();
        for (i, b) in in_blocks.iter().enumerate() {
            block.0.fill(0);
            if let Err(e) = layout::fill_block(input, i, token, &mut block) {
                self.release(slot, &blocks, false);
                return Err(DriverError::InvalidArgument(e.to_string()));
            }
            block.set_next_pointer(in_blocks.get(i + 1).map_or(0, |n| self.block_iova(n)));
            self.write_block(b, &block);
            if tracing {
                in_dump.push(block.0);
            }
        }
        for (i, b) in out_blocks.iter().enumerate() {
            block.0.fill(0);
            block.set_block_number(i as u32);
            block.set_token(token);
            block.set_next_pointer(out_blocks.get(i + 1).map_or(0, |n| self.block_iova(n)));
            self.write_block(b, &block);
        }

        // 2. The entry.
        let mut entry = CmdqEntry::new_zeroed();
        entry.set_cmd_type(CMD_TYPE_PCIE);
        entry.set_input_length(in_len);
        if let Some(first) = in_blocks.first() {
            entry.set_input_mailbox_pointer(self.block_iova(first));
        }
        let mut inline = [0u8; INLINE_LEN];
        layout::fill_inline(input, &mut inline);
        entry.input_inline_mut().0 = inline;
        if let Some(first) = out_blocks.first() {
            entry.set_output_mailbox_pointer(self.block_iova(first));
        }
        entry.set_output_length(out_len);
        entry.set_token(token);
        entry.set_ownership(true);
        entry.sign();
        let entry_in = entry.0;
        let Some(page) = self.page.as_ref() else {
            self.release(slot, &blocks, false);
            return Err(DriverError::Closed);
        };
        let entry_off = usize::from(slot) << self.log_stride;
        dma::write(page, entry_off, &entry_in);
        if tracing {
            trace::log_dump(
                opcode.code(),
                DumpDirection::Input,
                &entry_in,
                &in_dump,
                input.len(),
            );
            log::trace!(
                target: trace::TRACE_TARGET,
                "writing {:#x} to command doorbell",
                1u32 << slot
            );
        }

        // 3. Doorbell after the descriptor is visible.
        fence(Ordering::Release);
        self.bus.write32(init_seg::CMD_DBELL, 1u32 << slot);

        // 4. Poll.
        let done = match self.poll(page, entry_off, opcode, slot, class) {
            Ok(c) => c,
            Err(e) => {
                // The device may still own the slot and its mailboxes: never reuse them.
                self.release(slot, &blocks, true);
                self.observe(opcode, slot, &entry_in, input, None, None);
                return Err(e);
            }
        };

        // 5. Delivery status and output.
        let result = self.collect(opcode, op_mod, token, &done, out_blocks, output, tracing);
        self.release(slot, &blocks, false);
        let delivered = !matches!(
            result,
            Err(DriverError::Delivery { .. } | DriverError::UnknownDeliveryStatus { .. })
        );
        self.observe(
            opcode,
            slot,
            &entry_in,
            input,
            Some(&done.entry_out),
            delivered.then_some(&*output),
        );
        result
    }

    #[allow(clippy::too_many_arguments)]
    fn collect(
        &self,
        opcode: CmdOpcode,
        op_mod: u16,
        token: u8,
        done: &Completion,
        out_blocks: &[BlockRef],
        output: &mut [u8],
        tracing: bool,
    ) -> Result<(), DriverError> {
        let entry =
            CmdqEntry::read_from_bytes(&done.entry_out).map_err(|_| DriverError::BadOutput {
                opcode,
                what: "entry".into(),
            })?;
        let raw_delivery = entry.status();
        match DeliveryStatus::try_from(raw_delivery) {
            Ok(DeliveryStatus::Ok) => {}
            Ok(status) => return Err(DriverError::Delivery { opcode, status }),
            Err(_) => {
                return Err(DriverError::UnknownDeliveryStatus {
                    opcode,
                    status: raw_delivery,
                });
            }
        }
        let n = output.len().min(INLINE_LEN);
        output[..n].copy_from_slice(&entry.output_inline().0[..n]);
        let mut out_dump = Vec::new();
        let mut block = CmdMailbox::new_zeroed();
        for (i, b) in out_blocks.iter().enumerate() {
            self.read_block(b, &mut block);
            if tracing {
                out_dump.push(block.0);
            }
            layout::gather_block(&block, i, token, output).map_err(|e| DriverError::BadOutput {
                opcode,
                what: e.to_string(),
            })?;
        }
        if tracing {
            trace::log_dump(
                opcode.code(),
                DumpDirection::Output,
                &done.entry_out,
                &out_dump,
                output.len(),
            );
        }
        let status = output[0];
        let syndrome = u32::from_be_bytes([output[4], output[5], output[6], output[7]]);
        match CmdStatus::try_from(status) {
            Ok(CmdStatus::Ok) => Ok(()),
            Ok(status) => Err(DriverError::Command {
                opcode,
                op_mod,
                status,
                syndrome,
            }),
            Err(_) => Err(DriverError::UnknownCommandStatus {
                opcode,
                op_mod,
                status,
                syndrome,
            }),
        }
    }

    fn observe(
        &self,
        opcode: CmdOpcode,
        slot: u8,
        entry_in: &[u8; CMDQ_ENTRY_SIZE],
        input: &[u8],
        entry_out: Option<&[u8; CMDQ_ENTRY_SIZE]>,
        output: Option<&[u8]>,
    ) {
        if let Some(obs) = &self.observer {
            obs.on_command(&CommandRecord {
                opcode,
                slot,
                entry_in,
                input,
                entry_out,
                output,
            });
        }
    }

    /// Polls the owner bit of the entry at `entry_off` until the device hands it back.
    fn poll(
        &self,
        page: &DmaRegion,
        entry_off: usize,
        opcode: CmdOpcode,
        slot: u8,
        class: SlotClass,
    ) -> Result<Completion, DriverError> {
        let start = Instant::now();
        let mut spins: u32 = 0;
        let mut next_health = start + Duration::from_millis(50);
        let mut next_idle = start + Duration::from_millis(1);
        loop {
            let own = dma::read_u8(page, entry_off + CMDQ_ENTRY_SIZE - 1).unwrap_or(1);
            if own & 1 == 0 {
                // Read the descriptor only after ownership is back with software.
                fence(Ordering::Acquire);
                let mut entry_out = [0u8; CMDQ_ENTRY_SIZE];
                dma::read(page, entry_off, &mut entry_out);
                return Ok(Completion { entry_out });
            }
            let now = Instant::now();
            if now.duration_since(start) >= self.timeout {
                log::warn!(
                    "{opcode}({:#x}) timeout after {:?}: command slot {slot} is leaked",
                    opcode.code(),
                    self.timeout
                );
                if let Some(reason) = health::assess(&HealthRegisters::read(&*self.bus)) {
                    self.declare_fatal(reason);
                    return Err(DriverError::DeviceFatal { reason });
                }
                return Err(DriverError::Timeout {
                    opcode,
                    slot,
                    timeout: self.timeout,
                });
            }
            if class == SlotClass::Regular && now >= next_idle {
                next_idle = now + Duration::from_millis(1);
                let hook = self
                    .idle_hook
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                if let Some(hook) = hook {
                    hook(self);
                }
            }
            if now >= next_health {
                next_health = now + Duration::from_millis(50);
                if let Some(reason) = health::assess(&HealthRegisters::read(&*self.bus)) {
                    self.declare_fatal(reason);
                    return Err(DriverError::DeviceFatal { reason });
                }
            }
            spins = spins.saturating_add(1);
            if spins < 1_000 {
                std::hint::spin_loop();
            } else if spins < 2_000 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    /// Takes a slot, a token and `nblocks` mailbox blocks.
    fn acquire(
        &self,
        class: SlotClass,
        nblocks: usize,
    ) -> Result<(u8, u8, Vec<BlockRef>), DriverError> {
        let mut st = self.lock();
        let slot = loop {
            if st.closed {
                return Err(DriverError::Closed);
            }
            let candidates: u32 = match class {
                SlotClass::Regular => (1u32 << self.page_slot()) - 1,
                SlotClass::Pages => 1u32 << self.page_slot(),
            };
            let usable = candidates & !st.leaked;
            if usable == 0 {
                return Err(DriverError::InvalidArgument(
                    "every command slot of this class timed out earlier".into(),
                ));
            }
            let avail = usable & !st.busy;
            if avail != 0 {
                break avail.trailing_zeros() as u8;
            }
            st = self.slot_freed.wait(st).unwrap_or_else(|e| e.into_inner());
        };
        // Grow the pool before taking the slot, so a failure leaves nothing taken.
        while st.free.len() < nblocks {
            let page = self.bus.alloc_dma(POOL_PAGE)?;
            if page.len < POOL_PAGE || page.iova % MAILBOX_ALIGN as u64 != 0 {
                let _ = self.bus.free_dma(page);
                return Err(DriverError::Bus(rnic_hw_regs::BusError::InvalidArgument));
            }
            let idx = u32::try_from(st.pages.len())
                .map_err(|_| DriverError::Bus(rnic_hw_regs::BusError::NoMemory))?;
            st.pages.push(page);
            for sub in (0..BLOCKS_PER_PAGE as u8).rev() {
                st.free.push(BlockRef { page: idx, sub });
            }
        }
        st.busy |= 1 << slot;
        st.last_token = st.last_token.wrapping_add(1);
        if st.last_token == 0 {
            st.last_token = 1;
        }
        let token = st.last_token;
        let at = st.free.len() - nblocks;
        let mut blocks = st.free.split_off(at);
        blocks.reverse();
        Ok((slot, token, blocks))
    }

    /// Gives a slot and its blocks back (or keeps them forever when `leak`).
    fn release(&self, slot: u8, blocks: &[BlockRef], leak: bool) {
        let mut st = self.lock();
        st.busy &= !(1 << slot);
        if leak {
            st.leaked |= 1 << slot;
        } else {
            st.free.extend(blocks.iter().rev().copied());
        }
        drop(st);
        self.slot_freed.notify_all();
    }

    fn block_iova(&self, b: &BlockRef) -> u64 {
        let st = self.lock();
        st.pages
            .get(b.page as usize)
            .map_or(0, |p| p.iova + (usize::from(b.sub) * MAILBOX_ALIGN) as u64)
    }

    fn write_block(&self, b: &BlockRef, block: &CmdMailbox) {
        let st = self.lock();
        if let Some(page) = st.pages.get(b.page as usize) {
            dma::write(page, usize::from(b.sub) * MAILBOX_ALIGN, block.as_bytes());
        }
    }

    fn read_block(&self, b: &BlockRef, block: &mut CmdMailbox) {
        let st = self.lock();
        match st.pages.get(b.page as usize) {
            Some(page) => {
                dma::read(page, usize::from(b.sub) * MAILBOX_ALIGN, &mut block.0);
            }
            None => block.0.fill(0),
        }
    }

    /// Sets (or clears) the work done while regular commands wait.
    ///
    /// ```
    /// use rnic_driver::cmdq::CmdQueue;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let bus: std::sync::Arc<dyn rnic_hw_regs::Bus> = std::sync::Arc::new(dev.bus());
    /// # let reg = bus.read32(rnic_hw_regs::init_seg::CMDQ_ADDR_L_SZ);
    /// # let mut q = rnic_driver::cmdq::CmdQueue::new(bus.clone(), reg, std::time::Duration::from_secs(1), None)?;
    /// q.set_idle_hook(Some(std::sync::Arc::new(|q: &CmdQueue| assert!(q.slots() > 1))));
    /// q.set_idle_hook(None);
    /// assert!(q.slots() > 1);
    /// # Ok(()) }
    /// ```
    pub fn set_idle_hook(&self, hook: Option<IdleHook>) {
        *self.idle_hook.lock().unwrap_or_else(|e| e.into_inner()) = hook;
    }

    /// Frees nothing on shutdown: when the device is unresponsive it may still write the
    /// queue and the mailboxes, so their memory is leaked rather than reused.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let bus: std::sync::Arc<dyn rnic_hw_regs::Bus> = std::sync::Arc::new(dev.bus());
    /// # let reg = bus.read32(rnic_hw_regs::init_seg::CMDQ_ADDR_L_SZ);
    /// # let mut q = rnic_driver::cmdq::CmdQueue::new(bus.clone(), reg, std::time::Duration::from_secs(1), None)?;
    /// q.mark_unresponsive(); // the device may still write the queue...
    /// q.shutdown(); // ...so its memory is leaked, not freed
    /// assert_eq!(q.pool_blocks(), 0);
    /// # Ok(()) }
    /// ```
    pub fn mark_unresponsive(&self) {
        self.unresponsive.store(true, Ordering::Release);
    }

    /// Stops accepting commands and frees the DMA memory. Call only when the device no longer
    /// uses the queue (after DISABLE_HCA, or when the device is gone). If a command timed out
    /// or the queue was marked unresponsive, the memory is leaked instead.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dev = rnic_emulator::Device::new(Default::default(), rnic_emulator::RunMode::Deterministic);
    /// # let bus: std::sync::Arc<dyn rnic_hw_regs::Bus> = std::sync::Arc::new(dev.bus());
    /// # let reg = bus.read32(rnic_hw_regs::init_seg::CMDQ_ADDR_L_SZ);
    /// # let mut q = rnic_driver::cmdq::CmdQueue::new(bus.clone(), reg, std::time::Duration::from_secs(1), None)?;
    /// q.shutdown(); // memory freed, no more commands accepted
    /// let r = q.exec(&rnic_hw_regs::cmd::AllocPdIn::new_cmd(), &[], &mut []);
    /// assert!(matches!(r, Err(rnic_driver::DriverError::Closed)));
    /// # Ok(()) }
    /// ```
    pub fn shutdown(&mut self) {
        let (pages, leak) = {
            let mut st = self.lock();
            st.closed = true;
            st.free.clear();
            let leak = st.leaked != 0 || self.unresponsive.load(Ordering::Acquire);
            (std::mem::take(&mut st.pages), leak)
        };
        self.slot_freed.notify_all();
        if leak {
            log::warn!(
                "command queue: the device may still write it; {} DMA pages leaked",
                pages.len() + 1
            );
            let _leaked = self.page.take();
            return;
        }
        for p in pages {
            if let Err(e) = self.bus.free_dma(p) {
                log::warn!("freeing a mailbox page: {e}");
            }
        }
        if let Some(p) = self.page.take() {
            if let Err(e) = self.bus.free_dma(p) {
                log::warn!("freeing the command queue page: {e}");
            }
        }
    }
}

impl Drop for CmdQueue {
    fn drop(&mut self) {
        self.shutdown();
    }
}

const _: () = assert!(MAILBOX_SIZE <= MAILBOX_ALIGN);

#[cfg(test)]
mod tests {
    //! Error paths of the command queue against a scripted fake device (the bring-up itself
    //! is tested on the emulator, in the rnic-tests crate).
    use super::*;
    use rnic_hw_regs::cmd::{EnableHcaIn, QueryHcaCapIn, QueryIssiIn};
    use std::alloc::{Layout, alloc_zeroed, dealloc};
    use std::ptr::NonNull;

    type Handler = Box<dyn Fn(&FakeBus, u8) + Send + Sync>;

    /// Identity-mapped DMA (IOVA = host address) and a doorbell that runs `handler`.
    struct FakeBus {
        cmdq_l_sz: u32,
        cmdq: Mutex<u64>,
        handler: Handler,
        live: Mutex<usize>,
    }

    impl FakeBus {
        fn new(handler: Handler) -> Arc<Self> {
            Arc::new(Self {
                cmdq_l_sz: 0x56, // 32 slots of 64 bytes
                cmdq: Mutex::new(0),
                handler,
                live: Mutex::new(0),
            })
        }
        fn mem(&self, iova: u64, len: usize) -> DmaRegion {
            DmaRegion {
                vaddr: NonNull::new(iova as *mut u8).unwrap(),
                iova,
                len,
            }
        }
        fn entry(&self, slot: u8) -> (DmaRegion, usize) {
            (
                self.mem(*self.cmdq.lock().unwrap(), 4096),
                usize::from(slot) * 64,
            )
        }
    }

    impl Bus for FakeBus {
        fn read32(&self, offset: usize) -> u32 {
            match offset {
                0x14 => self.cmdq_l_sz,
                _ => 0,
            }
        }
        fn write32(&self, offset: usize, value: u32) {
            if offset == init_seg::CMD_DBELL {
                (self.handler)(self, value.trailing_zeros() as u8);
            }
        }
        fn write64(&self, _: usize, _: u64) {}
        fn bar_len(&self) -> usize {
            0x10_0000
        }
        fn alloc_dma(&self, len: usize) -> Result<DmaRegion, rnic_hw_regs::BusError> {
            let len = len.div_ceil(4096) * 4096;
            // SAFETY: non-zero size, valid alignment.
            let p = unsafe { alloc_zeroed(Layout::from_size_align(len, 4096).unwrap()) };
            *self.live.lock().unwrap() += 1;
            Ok(self.mem(p as u64, len))
        }
        fn free_dma(&self, r: DmaRegion) -> Result<(), rnic_hw_regs::BusError> {
            *self.live.lock().unwrap() -= 1;
            // SAFETY: allocated by `alloc_dma` with this layout.
            unsafe {
                dealloc(
                    r.vaddr.as_ptr(),
                    Layout::from_size_align(r.len, 4096).unwrap(),
                )
            };
            Ok(())
        }
        unsafe fn map_dma(&self, v: NonNull<u8>, _: usize) -> Result<u64, rnic_hw_regs::BusError> {
            Ok(v.as_ptr() as u64)
        }
        fn unmap_dma(&self, _: u64, _: usize) -> Result<(), rnic_hw_regs::BusError> {
            Ok(())
        }
        fn wait_irq(&self, _: u16, _: Duration) -> Result<bool, rnic_hw_regs::BusError> {
            Ok(false)
        }
    }

    fn queue(bus: &Arc<FakeBus>, timeout: Duration) -> CmdQueue {
        let q = CmdQueue::new(bus.clone(), bus.cmdq_l_sz, timeout, None).unwrap();
        *bus.cmdq.lock().unwrap() = q.iova();
        q
    }

    /// Completes the command in `slot` with `status_own` and output status/syndrome.
    fn complete(bus: &FakeBus, slot: u8, delivery: u8, status: u8, syndrome: u32) {
        let (page, off) = bus.entry(slot);
        let mut e = [0u8; 64];
        dma::read(&page, off, &mut e);
        e[0x20] = status;
        e[0x24..0x28].copy_from_slice(&syndrome.to_be_bytes());
        e[0x3F] = delivery << 1;
        dma::write(&page, off, &e);
    }

    #[test]
    fn statuses_become_typed_errors() {
        let bus = FakeBus::new(Box::new(|b, slot| complete(b, slot, 0, 0x03, 0xABCD)));
        let q = queue(&bus, Duration::from_secs(1));
        let e = q.exec(&EnableHcaIn::new_cmd(), &[], &mut []).unwrap_err();
        assert!(
            matches!(
                e,
                DriverError::Command {
                    opcode: CmdOpcode::EnableHca,
                    status: CmdStatus::BadParam,
                    syndrome: 0xABCD,
                    ..
                }
            ),
            "{e}"
        );

        let bus = FakeBus::new(Box::new(|b, slot| complete(b, slot, 0, 0x77, 1)));
        let q = queue(&bus, Duration::from_secs(1));
        let e = q.exec(&EnableHcaIn::new_cmd(), &[], &mut []).unwrap_err();
        assert!(
            matches!(e, DriverError::UnknownCommandStatus { status: 0x77, .. }),
            "{e}"
        );

        let bus = FakeBus::new(Box::new(|b, slot| complete(b, slot, 0x02, 0, 0)));
        let q = queue(&bus, Duration::from_secs(1));
        let e = q.exec(&EnableHcaIn::new_cmd(), &[], &mut []).unwrap_err();
        assert!(
            matches!(
                e,
                DriverError::Delivery {
                    status: DeliveryStatus::TokenError,
                    ..
                }
            ),
            "{e}"
        );
        let bus = FakeBus::new(Box::new(|b, slot| complete(b, slot, 0x55, 0, 0)));
        let q = queue(&bus, Duration::from_secs(1));
        let e = q.exec(&EnableHcaIn::new_cmd(), &[], &mut []).unwrap_err();
        assert!(
            matches!(e, DriverError::UnknownDeliveryStatus { status: 0x55, .. }),
            "{e}"
        );
    }

    #[test]
    fn a_silent_device_times_out_and_its_slot_is_never_reused() {
        let bus = FakeBus::new(Box::new(|_, _| {}));
        let mut q = queue(&bus, Duration::from_millis(20));
        let e = q.exec(&EnableHcaIn::new_cmd(), &[], &mut []).unwrap_err();
        assert!(
            matches!(
                e,
                DriverError::Timeout {
                    opcode: CmdOpcode::EnableHca,
                    slot: 0,
                    ..
                }
            ),
            "{e}"
        );
        let e = q.exec(&EnableHcaIn::new_cmd(), &[], &mut []).unwrap_err();
        assert!(matches!(e, DriverError::Timeout { slot: 1, .. }), "{e}");
        q.shutdown();
        // Leaked, not freed: the device may still write them.
        assert!(*bus.live.lock().unwrap() > 0);
    }

    #[test]
    fn mailboxes_are_chained_pooled_and_checked() {
        // The device answers QUERY_HCA_CAP with a 0x1010-byte output: 8 blocks, each with the
        // entry's token and its block number (it checks the driver's chain too).
        let bus = FakeBus::new(Box::new(|b, slot| {
            let (page, off) = b.entry(slot);
            let mut e = CmdqEntry::new_zeroed();
            dma::read(&page, off, &mut e.0);
            assert_eq!(e.cmd_type(), 7);
            assert!(e.signature_ok(), "the driver signs the entry");
            let token = e.token();
            assert_ne!(token, 0);
            let mut ptr = e.output_mailbox_pointer();
            let mut n = 0;
            while ptr != 0 {
                assert_eq!(ptr % 1024, 0);
                let blk = b.mem(ptr, MAILBOX_SIZE);
                let mut m = CmdMailbox::new_zeroed();
                dma::read(&blk, 0, &mut m.0);
                assert_eq!((m.block_number(), m.token()), (n, token));
                m.data_mut().0[0] = n as u8 + 1;
                if n == 3 && e.input_inline().op_mod() == 0xBAD {
                    m.set_token(token ^ 1);
                }
                dma::write(&blk, 0, &m.0);
                ptr = m.next_pointer();
                n += 1;
            }
            assert_eq!(n as usize, layout::blocks_for(e.output_length() as usize));
            e.set_ownership(false);
            dma::write(&page, off, &e.0);
        }));
        let q = queue(&bus, Duration::from_secs(1));
        let out = q.exec(&QueryHcaCapIn::new_cmd(), &[], &mut []).unwrap();
        assert_eq!(out.as_bytes()[0x10], 1);
        assert_eq!(out.as_bytes()[0x10 + 512], 2);
        assert_eq!(out.as_bytes()[0x10 + 7 * 512], 8);
        let pool = q.pool_blocks();
        let live = *bus.live.lock().unwrap();
        for _ in 0..10 {
            q.exec(&QueryHcaCapIn::new_cmd(), &[], &mut []).unwrap();
        }
        assert_eq!(q.pool_blocks(), pool, "steady state: no new DMA");
        assert_eq!(*bus.live.lock().unwrap(), live);

        let mut bad = QueryHcaCapIn::new_cmd();
        bad.set_op_mod(0xBAD);
        let e = q.exec(&bad, &[], &mut []).unwrap_err();
        assert!(matches!(e, DriverError::BadOutput { .. }), "{e}");
        assert!(e.to_string().contains("mailbox block 3"), "{e}");
    }

    /// Captures the command dumps logged at `trace` level, with the logging thread (tests run
    /// in parallel; each looks at its own lines).
    struct Capture(Mutex<Vec<(std::thread::ThreadId, String)>>);

    impl log::Log for Capture {
        fn enabled(&self, m: &log::Metadata<'_>) -> bool {
            m.target() == trace::TRACE_TARGET
        }
        fn log(&self, r: &log::Record<'_>) {
            if self.enabled(r.metadata()) {
                let me = std::thread::current().id();
                self.0.lock().unwrap().push((me, r.args().to_string()));
            }
        }
        fn flush(&self) {}
    }

    static CAPTURE: Capture = Capture(Mutex::new(Vec::new()));

    #[test]
    fn trace_level_logs_kernel_dumps() {
        let _ = log::set_logger(&CAPTURE);
        log::set_max_level(log::LevelFilter::Trace);
        let bus = FakeBus::new(Box::new(|b, slot| {
            let (page, off) = b.entry(slot);
            let mut e = CmdqEntry::new_zeroed();
            dma::read(&page, off, &mut e.0);
            e.set_ownership(false);
            dma::write(&page, off, &e.0);
        }));
        let q = queue(&bus, Duration::from_secs(1));
        q.exec(&rnic_hw_regs::cmd::QueryAdapterIn::new_cmd(), &[], &mut [])
            .unwrap();
        let me = std::thread::current().id();
        let lines: Vec<String> = CAPTURE
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, _)| *t == me)
            .map(|(_, l)| l.clone())
            .collect();
        let at = |needle: &str| {
            lines
                .iter()
                .position(|l| l == needle)
                .unwrap_or_else(|| panic!("no line {needle:?} in {lines:#?}"))
        };
        let i = at("dump command QUERY_ADAPTER(0x101) INPUT");
        assert_eq!(lines[i + 1], "000: 07000000 00000010 00000000 00000000");
        assert_eq!(lines[i + 2], "010: 01010000 00000000 00000000 00000000");
        assert!(lines[i + 4].starts_with("030: "), "{}", lines[i + 4]);
        assert!(lines[i + 4].contains(" 00000110 "), "output length 0x110");
        assert_eq!(lines[i + 5], "");
        assert_eq!(lines[i + 6], "writing 0x1 to command doorbell");
        let o = at("dump command QUERY_ADAPTER(0x101) OUTPUT");
        assert_eq!(lines[o + 6], "command block:");
        assert!(lines[o + 7].starts_with("040: "));
        assert!(lines[o + 42].starts_with("270: "));
    }

    #[test]
    fn tokens_increment_and_skip_zero() {
        let tokens = Arc::new(Mutex::new(Vec::new()));
        let t2 = tokens.clone();
        let bus = FakeBus::new(Box::new(move |b, slot| {
            let (page, off) = b.entry(slot);
            let mut e = [0u8; 64];
            dma::read(&page, off, &mut e);
            t2.lock().unwrap().push(e[0x3C]);
            complete(b, slot, 0, 0, 0);
        }));
        let q = queue(&bus, Duration::from_secs(1));
        for _ in 0..300 {
            q.exec(&QueryIssiIn::new_cmd(), &[], &mut []).unwrap();
        }
        let t = tokens.lock().unwrap();
        assert_eq!(&t[..3], &[1, 2, 3]);
        assert!(!t.contains(&0));
        assert_eq!(t[255], 1, "wraps past 0 to 1");
        assert_eq!(q.slots(), 32);
        assert_eq!(q.page_slot(), 31);
    }
}
