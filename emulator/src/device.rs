//! The emulated device: a state machine driven by BAR writes, plus the two ways to run it.
//!
//! Every BAR write that asks for work (a command doorbell, a UAR doorbell) becomes an event in
//! a lock-free queue. [`Device::step`] takes the device lock and processes the queued events.
//! In [`RunMode::Threaded`] the host's thread that wrote the doorbell does that itself when
//! the device is idle (its lock free), to completion, and then steps the in-process peer it
//! sent frames to the same way (never holding two device locks: a busy device is left to its
//! thread); the device thread does it for doorbells and frames that found the device busy,
//! for frames from other links and for timers. In
//! [`RunMode::Deterministic`] nothing runs on its own: by default the host's doorbell write
//! steps the device before it returns (so a single-threaded driver sees a synchronous device),
//! and time moves only when the test calls [`Device::advance`], so runs reproduce exactly.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam::queue::SegQueue;
use crossbeam::sync::{Parker, Unparker};
use rnic_hw_regs::init_seg::HealthSyndrome;

use crate::bar::{Bar, BarWrite};
use crate::bus::{DmaAllocator, EmuBus};
use crate::clock::Clock;
use crate::ctx::Ctx;
use crate::iommu::Iommu;
use crate::irq::Irqs;
use crate::profile::Profile;
use crate::state::{Counters, DeviceState};

/// How long the device thread keeps polling after its last work before it sleeps.
const SPIN_NS: u64 = 50_000;
/// The longest the device thread sleeps without a timer due.
const MAX_PARK_NS: u64 = 1_000_000;
/// How many times a poster that finds the device busy yields and looks again before it
/// leaves its doorbell to the device thread. The holder is mostly another host thread in
/// the middle of a step (and, on a small machine, often preempted on the poster's own
/// core): yielding lets it finish and take the doorbell, or lets the poster take it, where
/// waking the parked device thread put a third busy thread on two cores (`write-lat
/// --loopback` ran at about 6 us a message instead of 1.7 in such runs).
const POST_RETRIES: usize = 8;
/// Devices a thread steps for its in-process peers after its own step, at most, before it
/// leaves the rest to their threads (two devices answering each other could go on for as
/// long as they have work; the host's thread must get back to its application).
const MAX_INLINE_STEPS: usize = 64;
/// Woken devices a thread remembers while it steps (more are woken through their threads).
const MAX_DEFERRED: usize = 4;
/// `thread_wakes_at` while the device thread is awake (it looks at its timers itself).
const AWAKE: u64 = u64::MAX;

/// How the device runs.
///
/// ```
/// use rnic_emulator::{Device, Profile, RunMode};
/// use std::time::Duration;
///
/// let dev = Device::new(Profile::default(), RunMode::Deterministic);
/// assert_eq!(dev.mode(), RunMode::Deterministic);
/// dev.advance(Duration::from_micros(5)); // virtual time moves only when told
/// assert_eq!(dev.now_ns(), 5_000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunMode {
    /// A device thread processes doorbells as they arrive; time is real.
    Threaded,
    /// The caller drives the device ([`Device::step`], or automatically on each doorbell
    /// write, see [`Device::set_auto_step`]); time is virtual.
    Deterministic,
}

/// What the device thread and the host-side handles share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) bar: Bar,
    pub(crate) iommu: Iommu,
    pub(crate) irqs: Irqs,
    pub(crate) clock: Clock,
    pub(crate) dma: Mutex<DmaAllocator>,
    state: Mutex<DeviceState>,
    pending: SegQueue<BarWrite>,
    mode: RunMode,
    auto_step: AtomicBool,
    stop: AtomicBool,
    unparker: Option<Unparker>,
    /// The device thread was woken ([`Shared::unpark`]) and has not stepped since.
    woken: AtomicBool,
    /// When the parked device thread wakes on its own (device clock, ns), or [`AWAKE`]: a
    /// step in another thread that arms an earlier timer wakes it.
    thread_wakes_at: AtomicU64,
    /// The host thread whose drain holds this device ([`Drain`]), or 0.
    drainer: AtomicU64,
    /// Doorbells the host has rung (threaded mode; see [`crate::link::Waker::host_doorbells`]).
    host_doorbells: AtomicU64,
}

/// Doorbells a host thread makes in a row for devices its drain holds, at most, before it
/// lets them go (see [`Drain`]): another thread that keeps posting to them must not keep
/// this one from its application.
const MAX_DRAIN_ROUNDS: usize = 16;

/// Numbers host threads for [`Shared::drainer`] (0: none).
static DRAIN_IDS: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// This thread's number for [`Shared::drainer`].
    static DRAIN_ID: u64 = DRAIN_IDS.fetch_add(1, Ordering::Relaxed);
    /// The devices this thread's drain holds (see [`Drain`]); its capacity is kept.
    static DRAIN: RefCell<(bool, Vec<Arc<Shared>>)> = const { RefCell::new((false, Vec::new())) };
}

/// A host thread's drain: from a doorbell it rings until it goes back to its application,
/// the thread holds the devices it steps (its own, and the in-process peers it steps for
/// the frames it sent them). A doorbell another host thread rings on one of them meanwhile
/// is left to this thread ([`Shared::post`]), which takes it before the drain ends.
///
/// Why: two applications ping-ponging over an in-process pair (`write-lat --loopback`)
/// otherwise step both devices one way on one core and both the other way on the other, so
/// every device's state changed cores every half round trip (a 2-byte WRITE's requester
/// step ran at about one instruction a cycle). Held by one drain, the devices stay in one
/// core's cache while both applications post: t_typical 2.3-3.2 us -> 1.85-2.0 us on this
/// project's 2-core VM (10 runs each).
///
/// A drain ends once its devices have no doorbell waiting (after at most
/// [`MAX_DRAIN_ROUNDS`] rounds): it lets go of them, then looks once more (SeqCst fences on
/// both sides, as [`Shared::post`] looks at [`Shared::drainer`] after its push) and makes
/// sure any that got one meanwhile, or that another thread was stepping, gets it taken as a
/// busy poster does ([`Shared::take_or_wake`]: the thread stepping it takes it, and the
/// device thread is woken only after a few yields; waking it at once put a third busy
/// thread on two cores: `write-lat` over UDP between two processes, t_typical 5.7 ->
/// 11.5 us median of 10). Dropped by an unwinding panic, it lets go and wakes the device
/// threads of any devices with doorbells waiting.
struct Drain;

impl Drain {
    /// Starts this thread's drain, holding `d`; `None` when one is under way (a nested
    /// doorbell: the outer drain holds what this one would).
    fn start(d: &Arc<Shared>) -> Option<Drain> {
        let fresh = DRAIN.with(|x| !std::mem::replace(&mut x.borrow_mut().0, true));
        fresh.then(|| {
            enlist(d);
            Drain
        })
    }

    /// Steps the held devices that have doorbells waiting, until none has (or
    /// [`MAX_DRAIN_ROUNDS`]); one that another thread is stepping is left to the letting go.
    fn finish(self) {
        for _ in 0..MAX_DRAIN_ROUNDS {
            let mut stepped = false;
            let n = DRAIN.with(|x| x.borrow().1.len());
            for i in 0..n {
                let d = DRAIN.with(|x| x.borrow().1.get(i).cloned());
                if let Some(d) = d
                    && !d.pending.is_empty()
                {
                    stepped |= d.try_step();
                }
            }
            if !stepped {
                break;
            }
        }
        // `drop` lets go.
    }
}

impl Drop for Drain {
    fn drop(&mut self) {
        let me = DRAIN_ID.with(|d| *d);
        let mut held = DRAIN.with(|x| {
            let mut x = x.borrow_mut();
            x.0 = false;
            std::mem::take(&mut x.1)
        });
        for d in &held {
            let _ = d
                .drainer
                .compare_exchange(me, 0, Ordering::SeqCst, Ordering::SeqCst);
        }
        // Let go, then look: pairs with the fence in `Shared::post`.
        fence(Ordering::SeqCst);
        for d in &held {
            if std::thread::panicking() {
                if !d.pending.is_empty() {
                    d.unpark();
                }
            } else {
                d.take_or_wake();
            }
        }
        held.clear();
        DRAIN.with(|x| {
            let mut x = x.borrow_mut();
            if x.1.capacity() == 0 {
                x.1 = held;
            }
        });
    }
}

/// Adds `d` to this thread's drain, if one is under way (see [`Drain`]).
fn enlist(d: &Arc<Shared>) {
    DRAIN.with(|x| {
        let mut x = x.borrow_mut();
        if x.0 && !x.1.iter().any(|e| Arc::ptr_eq(e, d)) {
            d.drainer.store(DRAIN_ID.with(|id| *id), Ordering::SeqCst);
            x.1.push(Arc::clone(d));
        }
    });
}

/// The work of one thread's device steps (threaded mode): how deep in steps it is, and the
/// devices woken meanwhile (in-process peers it sent frames to), which it steps itself once
/// it has let go of its own device's lock, so that it never holds two device locks.
struct Stepping {
    depth: u32,
    /// [`step_woken`] runs in this thread: the steps it makes leave the devices they wake
    /// to its loop instead of stepping them from inside (two in-process peers answering
    /// each other would otherwise nest a step per answer, until the stack ran out).
    draining: bool,
    woken: [Option<Arc<Shared>>; MAX_DEFERRED],
}

thread_local! {
    static STEPPING: RefCell<Stepping> = const {
        RefCell::new(Stepping { depth: 0, draining: false, woken: [const { None }; MAX_DEFERRED] })
    };
}

impl crate::link::Wake for Shared {
    fn wake_thread(self: Arc<Self>) {
        self.unpark();
    }

    fn host_doorbells(&self) -> Option<u64> {
        (self.mode == RunMode::Threaded).then(|| self.host_doorbells.load(Ordering::Relaxed))
    }

    /// Inside a step: remembered for after it (see [`Stepping`]); outside: the thread.
    fn wake(self: Arc<Self>) {
        let unwoken = STEPPING.with(|s| {
            let mut s = s.borrow_mut();
            if s.depth == 0 {
                return Some(self);
            }
            if s.woken.iter().flatten().any(|w| Arc::ptr_eq(w, &self)) {
                return None;
            }
            match s.woken.iter_mut().find(|w| w.is_none()) {
                Some(slot) => {
                    *slot = Some(self);
                    None
                }
                None => Some(self),
            }
        });
        if let Some(d) = unwoken {
            d.unpark();
        }
    }

    /// Outside a step, and the device idle: its work in this thread (see
    /// [`crate::link::Waker::run`]); else as [`Self::wake`].
    fn run(self: Arc<Self>) -> bool {
        if STEPPING.with(|s| s.borrow().depth) > 0 {
            self.wake();
            return false;
        }
        if self.try_step() {
            return true;
        }
        self.unpark();
        false
    }
}

/// Takes one device woken during this thread's steps, if any.
fn take_woken() -> Option<Arc<Shared>> {
    STEPPING.with(|s| s.borrow_mut().woken.iter_mut().find_map(Option::take))
}

/// Steps, in this thread, the devices its steps woke (and those their steps woke), each
/// only if it is idle (its lock free); a busy one, or any beyond [`MAX_INLINE_STEPS`], is
/// left to its own thread. Called with no device lock held.
fn step_woken() {
    let nested = STEPPING.with(|s| std::mem::replace(&mut s.borrow_mut().draining, true));
    if nested {
        return;
    }
    /// Ends the draining when the loop ends, unwinding included.
    struct Drained;
    impl Drop for Drained {
        fn drop(&mut self) {
            STEPPING.with(|s| s.borrow_mut().draining = false);
        }
    }
    let _drained = Drained;
    let mut steps = 0;
    while let Some(d) = take_woken() {
        enlist(&d);
        if steps >= MAX_INLINE_STEPS || !d.try_step() {
            d.unpark();
        }
        steps += 1;
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, DeviceState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A function-level reset (see [`Device::function_reset`]).
    pub(crate) fn function_reset(&self) -> Result<(), rnic_hw_regs::BusError> {
        let mut st = self.lock();
        if !self.bar.reset() {
            return Err(rnic_hw_regs::BusError::DeviceLost);
        }
        while self.pending.pop().is_some() {}
        let port = std::mem::replace(&mut st.port, crate::port::Port::new());
        *st = DeviceState::new(st.profile.clone());
        st.port = port;
        st.port.reset();
        Ok(())
    }

    /// Wakes the device thread (threaded mode).
    fn unpark(&self) {
        if let Some(u) = &self.unparker {
            self.woken.store(true, Ordering::Release);
            u.unpark();
        }
    }

    /// Queues a BAR event and makes sure it gets processed.
    ///
    /// A threaded device that is idle does the work in the caller's thread, to completion
    /// (and steps the in-process peer it sent frames to, see [`step_woken`]). A busy one
    /// (its lock held by its thread or another host thread) is looked at again a few times
    /// ([`POST_RETRIES`]): the event is done once another stepper took it (the queue is
    /// empty) or this thread could step; only then does the device thread get it. A device
    /// another host thread's drain holds ([`Drain`]) is left to that thread.
    pub(crate) fn post(self: &Arc<Self>, ev: BarWrite) {
        if ev == BarWrite::None {
            return;
        }
        self.pending.push(ev);
        match self.mode {
            RunMode::Threaded => {
                // Only a change is read, so a lost update between two posting threads
                // costs nothing: no read-modify-write on every doorbell.
                let n = self.host_doorbells.load(Ordering::Relaxed);
                self.host_doorbells
                    .store(n.wrapping_add(1), Ordering::Relaxed);
                // Pushed, then look: pairs with the fence of `Drain`'s letting go.
                fence(Ordering::SeqCst);
                let holder = self.drainer.load(Ordering::SeqCst);
                if holder != 0 && holder != DRAIN_ID.with(|d| *d) {
                    // Another host thread's drain holds the device: it takes the doorbell.
                    return;
                }
                match Drain::start(self) {
                    // It steps this device first; its letting go takes what is left.
                    Some(drain) => drain.finish(),
                    None => self.take_or_wake(),
                }
            }
            RunMode::Deterministic => {
                if self.auto_step.load(Ordering::Acquire) {
                    self.step();
                }
            }
        }
    }

    /// Makes sure the doorbells waiting are taken: by this thread if the device is idle, or
    /// by the thread stepping it (whose step takes what came meanwhile), looked at again
    /// [`POST_RETRIES`] times with a yield between; only then is the device thread woken.
    fn take_or_wake(&self) {
        if self.pending.is_empty() || self.try_step() {
            return;
        }
        for _ in 0..POST_RETRIES {
            std::thread::yield_now();
            if self.pending.is_empty() || self.try_step() {
                return;
            }
        }
        self.unpark();
    }

    /// Processes every queued event, then runs the port (frames on the loopback and the link,
    /// transport timers) until it is idle; returns how many events and frames there were.
    pub(crate) fn step(&self) -> usize {
        let n = self.step_locked(self.lock(), false);
        step_woken();
        n
    }

    /// The device thread's [`Shared::step`]: `None` (nothing done) when another thread holds
    /// the device, which then takes the work there is (a poster that finds the device busy
    /// unparks the thread, so nothing waits for long).
    fn step_unless_busy(&self) -> Option<usize> {
        let st = match self.state.try_lock() {
            Ok(st) => st,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        let n = self.step_locked(st, false);
        step_woken();
        Some(n)
    }

    /// [`Shared::step`] if the device is idle (its lock free), in this thread; returns
    /// whether it ran. Doorbells that came while it ran, whose posters found it busy, are
    /// taken too.
    fn try_step(&self) -> bool {
        // A device whose `Device` is gone runs nothing more (its thread has stopped too).
        if self.stop.load(Ordering::Acquire) {
            return false;
        }
        let mut ran = false;
        loop {
            let st = match self.state.try_lock() {
                Ok(st) => st,
                Err(TryLockError::Poisoned(e)) => e.into_inner(),
                Err(TryLockError::WouldBlock) => break,
            };
            self.step_locked(st, true);
            ran = true;
            if self.pending.is_empty() {
                break;
            }
        }
        if ran {
            step_woken();
        }
        ran
    }

    /// The step itself, on the locked state; `inline`: in a thread other than the device's
    /// (the device thread is told when this armed a timer earlier than its wake-up).
    fn step_locked(&self, mut st: MutexGuard<'_, DeviceState>, inline: bool) -> usize {
        STEPPING.with(|s| s.borrow_mut().depth += 1);
        let mut n = 0;
        loop {
            // Most steps find no doorbell: the cheap look first.
            while !self.pending.is_empty()
                && let Some(ev) = self.pending.pop()
            {
                n += 1;
                // Hung or dead firmware executes nothing; the host sees its commands time out.
                if self.bar.firmware_dead() {
                    continue;
                }
                let mut ctx = Ctx {
                    state: &mut st,
                    dma: &self.iommu,
                    irqs: &self.irqs,
                    clock: &self.clock,
                };
                match ev {
                    BarWrite::None => {}
                    BarWrite::CmdDoorbell(mask) => crate::cmd::doorbell(&mut ctx, &self.bar, mask),
                    BarWrite::Uar {
                        uar,
                        offset,
                        value,
                        width,
                    } => crate::doorbells::uar_write(&mut ctx, uar, offset, value, width),
                }
            }
            if !self.bar.firmware_dead() {
                let mut ctx = Ctx {
                    state: &mut st,
                    dma: &self.iommu,
                    irqs: &self.irqs,
                    clock: &self.clock,
                };
                if !ctx.state.rq_flush_watch.is_empty() {
                    crate::rq::flush_in_error(&mut ctx);
                }
                let (frames, more) = crate::port::rx::run(&mut ctx);
                n += frames;
                // The port stopped for its budget (a link that does not run dry): a threaded
                // device lets go of its lock and its thread steps again; a deterministic one
                // goes on until idle, taking the doorbells that came meanwhile first.
                if more
                    && self.mode == RunMode::Deterministic
                    && n < crate::port::rx::MAX_FRAMES_PER_RUN
                {
                    continue;
                }
            }
            break;
        }
        st.counters.iommu_faults = self.iommu.faults();
        if inline && self.mode == RunMode::Threaded {
            let wakes_at = self.thread_wakes_at.load(Ordering::SeqCst);
            if wakes_at != AWAKE && next_deadline(&st).is_some_and(|t| t < wakes_at) {
                self.unpark();
            }
        }
        drop(st);
        STEPPING.with(|s| s.borrow_mut().depth -= 1);
        n
    }

    /// The earliest time (device clock, ns) a transport timer or the link has something to
    /// do, if any.
    pub(crate) fn next_timer_ns(&self) -> Option<u64> {
        next_deadline(&self.lock())
    }

    /// Runs `f` on the locked device state with a context (crate tests build resources
    /// directly with it).
    #[cfg(test)]
    pub(crate) fn with_ctx<R>(&self, f: impl FnOnce(&mut Ctx<'_>) -> R) -> R {
        let mut st = self.lock();
        let mut ctx = Ctx {
            state: &mut st,
            dma: &self.iommu,
            irqs: &self.irqs,
            clock: &self.clock,
        };
        f(&mut ctx)
    }
}

/// The earliest time a transport timer or the link of `st` has something to do.
fn next_deadline(st: &DeviceState) -> Option<u64> {
    let t = crate::transport::next_deadline(st);
    match (t, st.port.link_deadline()) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// An emulated ConnectX. The host side reaches it only through [`Device::bus`].
///
/// ```
/// use rnic_emulator::{Device, Profile, RunMode};
/// use rnic_hw_regs::Bus;
///
/// let dev = Device::new(Profile::default(), RunMode::Deterministic);
/// let bus = dev.bus();
/// assert_eq!(bus.read32(0x004) >> 16, 5); // cmdif_rev
/// assert_eq!(bus.read32(0x1FC) >> 31, 1); // initializing until the cmdq address is written
/// ```
#[derive(Debug)]
pub struct Device {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Device {
    /// Creates a device with `profile`, running as `mode` says.
    ///
    /// # Panics
    ///
    /// With [`RunMode::Threaded`], if the OS cannot start the device's thread (as
    /// [`std::thread::spawn`] does).
    ///
    /// ```
    /// use rnic_emulator::{Device, Profile, RunMode};
    /// use rnic_hw_regs::{init_seg, Bus};
    ///
    /// let dev = Device::new(Profile::connectx4(), RunMode::Threaded);
    /// let bus = dev.bus();
    /// let (rev, sub) = (bus.read32(init_seg::FW_REV), bus.read32(init_seg::CMDIF_REV_FW_SUB));
    /// let fw = init_seg::FwVersion::decode(rev, sub);
    /// assert_eq!(fw.to_string(), "14.12.1220");
    /// ```
    pub fn new(profile: Profile, mode: RunMode) -> Self {
        let clock = match mode {
            RunMode::Threaded => Clock::real(),
            RunMode::Deterministic => Clock::virtual_at_zero(),
        };
        let parker = (mode == RunMode::Threaded).then(Parker::new);
        let shared = Arc::new(Shared {
            bar: Bar::new(&profile, clock.clone()),
            iommu: Iommu::new(),
            irqs: Irqs::default(),
            dma: Mutex::new(DmaAllocator::new()),
            state: Mutex::new(DeviceState::new(profile)),
            pending: SegQueue::new(),
            mode,
            auto_step: AtomicBool::new(true),
            stop: AtomicBool::new(false),
            unparker: parker.as_ref().map(|p| p.unparker().clone()),
            woken: AtomicBool::new(false),
            thread_wakes_at: AtomicU64::new(AWAKE),
            drainer: AtomicU64::new(0),
            host_doorbells: AtomicU64::new(0),
            clock,
        });
        let thread = parker.map(|parker| {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("rnic-emu".into())
                .spawn(move || {
                    // Step when there is a reason: woken (a doorbell or a frame that found
                    // the device busy, link traffic), a doorbell queued, or back from a
                    // sleep (timers). After work it found, stay awake a little (doorbells
                    // and frames come in bursts), looking at those reasons without taking
                    // the lock, then sleep until woken or the next timer is due. Work the
                    // host's threads do in place (see `Shared::post`) does not wake it.
                    let mut idle_since: Option<u64> = None;
                    let mut worked = false;
                    let mut due = true;
                    while !shared.stop.load(Ordering::Acquire) {
                        if std::mem::take(&mut due)
                            || shared.woken.swap(false, Ordering::AcqRel)
                            || !shared.pending.is_empty()
                        {
                            match shared.step_unless_busy() {
                                Some(0) => {}
                                Some(_) => {
                                    idle_since = None;
                                    worked = true;
                                    continue;
                                }
                                // Another thread steps the device; it may have looked at the
                                // link before the frame that woke us came: look again soon.
                                None => {
                                    shared.woken.store(true, Ordering::Release);
                                    worked = true;
                                }
                            }
                        }
                        let now = shared.clock.now_ns();
                        let since = *idle_since.get_or_insert(now);
                        if worked && now.saturating_sub(since) < SPIN_NS {
                            std::hint::spin_loop();
                            std::thread::yield_now();
                            continue;
                        }
                        // The wake-up time is published before the timers are looked at: a
                        // step in another thread that arms an earlier one then sees it and
                        // unparks (see `step_locked`).
                        shared
                            .thread_wakes_at
                            .store(now.saturating_add(MAX_PARK_NS), Ordering::SeqCst);
                        let wait = shared
                            .next_timer_ns()
                            .map_or(MAX_PARK_NS, |t| t.saturating_sub(now).min(MAX_PARK_NS));
                        shared
                            .thread_wakes_at
                            .store(now.saturating_add(wait), Ordering::SeqCst);
                        if wait > 0 {
                            parker.park_timeout(Duration::from_nanos(wait));
                        }
                        shared.thread_wakes_at.store(AWAKE, Ordering::SeqCst);
                        idle_since = None;
                        worked = false;
                        due = true;
                    }
                })
                .expect("spawning the device thread")
        });
        Device { shared, thread }
    }

    /// The host's handle: implements [`rnic_hw_regs::Bus`]. Handles are cheap to clone.
    ///
    /// ```
    /// use rnic_emulator::{Device, Profile, RunMode};
    /// use rnic_hw_regs::Bus;
    ///
    /// let dev = Device::new(Profile::default(), RunMode::Deterministic);
    /// let bus = dev.bus();
    /// assert_eq!(bus.bar_len(), Profile::default().bar_len());
    /// let region = bus.alloc_dma(4096).unwrap();
    /// assert_eq!(dev.dma_mappings(), 1);
    /// bus.free_dma(region).unwrap();
    /// ```
    pub fn bus(&self) -> EmuBus {
        EmuBus::new(Arc::clone(&self.shared))
    }

    /// How the device runs.
    ///
    /// ```
    /// use rnic_emulator::{Device, Profile, RunMode};
    ///
    /// let dev = Device::new(Profile::default(), RunMode::Threaded);
    /// assert_eq!(dev.mode(), RunMode::Threaded);
    /// ```
    pub fn mode(&self) -> RunMode {
        self.shared.mode
    }

    /// Processes every queued doorbell now; returns how many there were.
    ///
    /// A frame from the link is received on the next step (and this one, not RoCE, is dropped):
    ///
    /// ```
    /// use rnic_emulator::link::{InProcLink, Link};
    /// use rnic_emulator::{Device, Profile, RunMode};
    ///
    /// let (a, mut peer) = InProcLink::pair();
    /// let dev = Device::with_link(Profile::default(), RunMode::Deterministic, a);
    /// assert_eq!(dev.step(), 0); // nothing queued
    /// peer.transmit(&[0xFF; 60]); // not RoCE v2, and no flow table to steer it with
    /// assert_eq!(dev.step(), 1);
    /// assert_eq!(dev.counters().drops.steering_no_root, 1);
    /// ```
    pub fn step(&self) -> usize {
        self.shared.step()
    }

    /// In deterministic mode, whether a doorbell write steps the device before returning
    /// (the default). Turn it off to queue doorbells and [`Device::step`] by hand.
    ///
    /// ```
    /// use rnic_emulator::{Device, Profile, RunMode};
    /// use rnic_hw_regs::{doorbell, Bus};
    ///
    /// let dev = Device::new(Profile::default(), RunMode::Deterministic);
    /// dev.set_auto_step(false);
    /// // An EQ doorbell on UAR page 0x10 is queued, not executed...
    /// dev.bus().write32(doorbell::uar_bar_offset(0x10) + doorbell::UAR_EQ_UPDATE, 0);
    /// assert_eq!(dev.counters().bad_doorbells, 0);
    /// assert_eq!(dev.step(), 1); // ...until the step (it names no EQ, so it is dropped)
    /// assert_eq!(dev.counters().bad_doorbells, 1);
    /// ```
    pub fn set_auto_step(&self, on: bool) {
        self.shared.auto_step.store(on, Ordering::Release);
    }

    /// Moves virtual time forward (deterministic mode; ignored with a real clock).
    ///
    /// ```
    /// use rnic_emulator::{Device, Profile, RunMode};
    /// use std::time::Duration;
    ///
    /// let dev = Device::new(Profile::default(), RunMode::Deterministic);
    /// dev.advance(Duration::from_millis(2));
    /// assert_eq!(dev.now_ns(), 2_000_000);
    /// ```
    pub fn advance(&self, d: Duration) {
        self.shared
            .clock
            .advance(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// The device's clock, in nanoseconds since it was created.
    ///
    /// ```
    /// use rnic_emulator::{Device, Profile, RunMode};
    ///
    /// let dev = Device::new(Profile::default(), RunMode::Deterministic);
    /// assert_eq!(dev.now_ns(), 0); // a deterministic device starts at virtual time 0
    /// ```
    pub fn now_ns(&self) -> u64 {
        self.shared.clock.now_ns()
    }

    /// Runs `f` with the device's context (crate tests only).
    #[cfg(test)]
    pub(crate) fn with_ctx<R>(&self, f: impl FnOnce(&mut Ctx<'_>) -> R) -> R {
        self.shared.with_ctx(f)
    }

    /// Attaches the device's port to `link`: frames for IP addresses that are not this
    /// device's own GIDs leave through it, and frames it delivers are received (processed by
    /// [`Device::step`], or by the device thread, which the link wakes).
    ///
    /// ```
    /// use rnic_emulator::link::{FaultyLink, InProcLink, Link};
    /// use rnic_emulator::{Device, Profile, RunMode};
    ///
    /// let dev = Device::new(Profile::default(), RunMode::Deterministic);
    /// let (a, mut peer) = InProcLink::pair();
    /// dev.set_link(Box::new(FaultyLink::new(a, "loss=0.5,seed=1".parse().unwrap())));
    /// peer.transmit(&[0; 60]); // faults apply to what the device sends, not what it receives
    /// dev.step();
    /// assert_eq!(dev.counters().rx_dropped, 1);
    /// ```
    pub fn set_link(&self, mut link: Box<dyn crate::link::Link>) {
        let target = (self.shared.mode == RunMode::Threaded).then(|| {
            let weak: Weak<dyn crate::link::Wake> = Arc::downgrade(&self.shared) as _;
            weak
        });
        link.attach(&crate::link::LinkEnv {
            clock: self.shared.clock.clone(),
            waker: crate::link::Waker::new(target),
        });
        self.shared.lock().port.set_link(link);
    }

    /// A device with `profile`, running as `mode` says, whose port is attached to `link`.
    ///
    /// ```
    /// use rnic_emulator::link::InProcLink;
    /// use rnic_emulator::{Device, Profile, RunMode};
    ///
    /// let (a, b) = InProcLink::pair();
    /// let dev_a = Device::with_link(Profile::default(), RunMode::Deterministic, a);
    /// let dev_b = Device::with_link(Profile::default(), RunMode::Deterministic, b);
    /// # drop((dev_a, dev_b));
    /// ```
    pub fn with_link(
        profile: Profile,
        mode: RunMode,
        link: impl crate::link::Link + 'static,
    ) -> Self {
        let dev = Device::new(profile, mode);
        dev.set_link(Box::new(link));
        dev
    }

    /// A device with `profile`, running as `mode` says, whose port is the Linux TAP
    /// interface `ifname` ([`crate::link::TapLink::open`]: created if it does not exist,
    /// which needs `CAP_NET_ADMIN`). The port's MTU is the interface's (the wire's limit, not
    /// the profile's), and the port answers to the profile's MAC; its IP addresses are the
    /// GIDs the driver sets, as on a real port. Returns the link's counters beside it.
    ///
    /// ```no_run
    /// use rnic_emulator::{Device, Profile, RunMode};
    ///
    /// let (dev, stats) = Device::on_tap(Profile::default(), RunMode::Threaded, "rnic0")?;
    /// # drop((dev, stats));
    /// # Ok::<(), rnic_emulator::link::TapError>(())
    /// ```
    pub fn on_tap(
        profile: Profile,
        mode: RunMode,
        ifname: &str,
    ) -> Result<(Self, Arc<crate::link::TapStats>), crate::link::TapError> {
        let link = crate::link::TapLink::open(ifname)?;
        let stats = link.stats();
        let profile = Profile {
            port_mtu: u16::try_from(link.mtu()).unwrap_or(u16::MAX),
            ..profile
        };
        Ok((Device::with_link(profile, mode, link), stats))
    }

    /// Writes every frame the port sends or receives from now on to a new pcap file at
    /// `path` (Ethernet link type; timestamps from the device clock). Replaces (and closes)
    /// a capture in progress.
    ///
    /// ```
    /// use rnic_emulator::link::{InProcLink, Link};
    /// use rnic_emulator::{Device, Profile, RunMode};
    ///
    /// let (a, mut peer) = InProcLink::pair();
    /// let dev = Device::with_link(Profile::default(), RunMode::Deterministic, a);
    /// let path = std::env::temp_dir().join(format!("rnic-doc-capture-{}.pcap", std::process::id()));
    /// dev.capture_to(&path)?;
    /// peer.transmit(&[0xAA; 64]);
    /// dev.step();
    /// assert_eq!(dev.stop_capture()?, 1); // received frames are captured too
    /// assert!(std::fs::metadata(&path)?.len() > 64);
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn capture_to(&self, path: impl AsRef<std::path::Path>) -> std::io::Result<()> {
        let cap = crate::link::pcap::Capture::create(path.as_ref())?;
        let old = self.shared.lock().port.capture.replace(cap);
        old.map_or(Ok(()), crate::link::pcap::Capture::finish)
    }

    /// Ends the capture in progress (flushing the file); returns how many frames it holds.
    ///
    /// ```
    /// use rnic_emulator::{Device, Profile, RunMode};
    ///
    /// let dev = Device::new(Profile::default(), RunMode::Deterministic);
    /// assert_eq!(dev.stop_capture().unwrap(), 0); // no capture in progress
    /// ```
    pub fn stop_capture(&self) -> std::io::Result<u64> {
        let cap = self.shared.lock().port.capture.take();
        match cap {
            Some(c) => {
                let n = c.frames;
                c.finish()?;
                Ok(n)
            }
            None => Ok(0),
        }
    }

    /// The earliest device-clock time (ns) at which a transport timer (retransmission, RNR
    /// wait) or the link (a delayed frame) has work, if any. A deterministic test that finds
    /// both devices idle advances time to it.
    ///
    /// ```
    /// use rnic_emulator::{Device, Profile, RunMode};
    ///
    /// let dev = Device::new(Profile::default(), RunMode::Deterministic);
    /// assert_eq!(dev.next_timer_ns(), None); // no QP waits on anything
    /// ```
    pub fn next_timer_ns(&self) -> Option<u64> {
        self.shared.next_timer_ns()
    }

    /// Raises a health syndrome in the health buffer, as failing firmware does.
    ///
    /// ```
    /// use rnic_emulator::{Device, Profile, RunMode};
    /// use rnic_hw_regs::init_seg::{HealthSyndrome, HEALTH_SYND};
    /// use rnic_hw_regs::Bus;
    ///
    /// let dev = Device::new(Profile::default(), RunMode::Deterministic);
    /// dev.raise_health_syndrome(HealthSyndrome::FwCrc);
    /// assert_eq!((dev.bus().read32(HEALTH_SYND) >> 16) & 0xFF, 0x09);
    /// ```
    pub fn raise_health_syndrome(&self, synd: HealthSyndrome) {
        self.shared.bar.raise_health_syndrome(synd);
    }

    /// Hangs the firmware: the health counter stops and no command or doorbell is executed.
    ///
    /// ```
    /// use rnic_emulator::{Device, Profile, RunMode};
    /// use rnic_hw_regs::init_seg::HEALTH_COUNTER;
    /// use rnic_hw_regs::Bus;
    /// use std::time::Duration;
    ///
    /// let dev = Device::new(Profile::default(), RunMode::Deterministic);
    /// let bus = dev.bus();
    /// dev.hang_firmware();
    /// let before = bus.read32(HEALTH_COUNTER);
    /// dev.advance(Duration::from_secs(5));
    /// assert_eq!(bus.read32(HEALTH_COUNTER), before); // the heartbeat stopped
    /// ```
    pub fn hang_firmware(&self) {
        self.shared.bar.freeze_health_counter();
    }

    /// Kills the PCI link: every register reads all ones, as after a surprise removal.
    ///
    /// ```
    /// use rnic_emulator::{Device, Profile, RunMode};
    /// use rnic_hw_regs::{init_seg, Bus};
    ///
    /// let dev = Device::new(Profile::default(), RunMode::Deterministic);
    /// dev.kill_pci_link();
    /// assert_eq!(dev.bus().read32(init_seg::FW_REV), init_seg::FW_VER_PCI_DEAD);
    /// ```
    pub fn kill_pci_link(&self) {
        self.shared.bar.kill_pci_link();
    }

    /// A PCI function-level reset (FLR), as VFIO's `VFIO_DEVICE_RESET` gives a real function:
    /// the device drops every object, firmware page and command-queue setting, its counters
    /// and any health syndrome or hung firmware, and comes back as at power-on, waiting for a
    /// driver to bring it up. The port's link and capture stay (the cable is still plugged
    /// in), and so do the host's DMA mappings (they are the IOMMU's, not the device's). A
    /// dead PCI link does not come back: `Err(DeviceLost)`.
    ///
    /// ```
    /// use rnic_emulator::{Device, Profile, RunMode};
    /// use rnic_hw_regs::init_seg::{HealthSyndrome, HEALTH_SYND, INITIALIZING};
    /// use rnic_hw_regs::{Bus, BusError};
    ///
    /// let dev = Device::new(Profile::default(), RunMode::Deterministic);
    /// let bus = dev.bus();
    /// dev.raise_health_syndrome(HealthSyndrome::FwCrc);
    /// assert_ne!(bus.read32(HEALTH_SYND), 0);
    /// bus.function_reset().unwrap(); // what the driver calls (`Bus::function_reset`)
    /// assert_eq!(bus.read32(HEALTH_SYND), 0);
    /// assert_ne!(bus.read32(INITIALIZING) >> 31, 0); // waiting for a bring-up
    /// dev.kill_pci_link();
    /// assert_eq!(dev.function_reset(), Err(BusError::DeviceLost));
    /// ```
    pub fn function_reset(&self) -> Result<(), rnic_hw_regs::BusError> {
        self.shared.function_reset()
    }

    /// A snapshot of the device's counters.
    ///
    /// ```
    /// use rnic_emulator::{Counters, Device, Profile, RunMode};
    ///
    /// let dev = Device::new(Profile::default(), RunMode::Deterministic);
    /// assert_eq!(dev.counters(), Counters::default()); // a new device has done nothing
    /// ```
    pub fn counters(&self) -> Counters {
        let mut c = {
            let mut st = self.shared.lock();
            let st = &mut *st;
            crate::port::rx::sync_link_drops(st);
            st.counters
        };
        c.iommu_faults = self.shared.iommu.faults();
        c
    }

    /// The state QP `qpn` is in, as the device holds it (`None`: no such QP; a value the
    /// PRM does not name reads as ERR). What QUERY_QP reports, without a command: a test
    /// or fuzz harness that checks many QPs often asks this way.
    ///
    /// ```
    /// use rnic_emulator::{Device, Profile, RunMode};
    ///
    /// let dev = Device::new(Profile::default(), RunMode::Deterministic);
    /// assert_eq!(dev.qp_state(0x10), None); // no QP was created
    /// ```
    pub fn qp_state(&self, qpn: u32) -> Option<rnic_hw_regs::ctx::QpState> {
        let st = self.shared.lock();
        let qp = st.res.qps.get(qpn)?;
        Some(
            rnic_hw_regs::ctx::QpState::try_from(qp.ctx.state())
                .unwrap_or(rnic_hw_regs::ctx::QpState::Err),
        )
    }

    /// Firmware pages the device holds now.
    ///
    /// ```
    /// use rnic_emulator::{Device, Profile, RunMode};
    ///
    /// let dev = Device::new(Profile::default(), RunMode::Deterministic);
    /// assert_eq!(dev.pages_held(), 0); // until MANAGE_PAGES gives some
    /// ```
    pub fn pages_held(&self) -> usize {
        self.shared.lock().pages.held.len()
    }

    /// Asks the host for `n` more firmware pages at run time (negative: offers `-n` pages
    /// back), as firmware does: a page-request EQE (type 0x0B, func_id 0, num_pages signed)
    /// on the EQ subscribed to page requests; the host answers with MANAGE_PAGES give (or
    /// can't give) or take, and QUERY_PAGES regular reports what is still outstanding.
    /// Returns whether an EQ took the event.
    ///
    /// ```
    /// use rnic_emulator::{Device, Profile, RunMode};
    ///
    /// let dev = Device::new(Profile::default(), RunMode::Deterministic);
    /// assert!(!dev.request_pages(8)); // no EQ takes page requests yet
    /// ```
    pub fn request_pages(&self, n: i32) -> bool {
        let mut st = self.shared.lock();
        let mut ctx = Ctx {
            state: &mut st,
            dma: &self.shared.iommu,
            irqs: &self.shared.irqs,
            clock: &self.shared.clock,
        };
        crate::cmd::pages::request(&mut ctx, n)
    }

    /// IOVA mappings the host has made and not removed (DMA regions and registered memory).
    ///
    /// ```
    /// use rnic_emulator::{Device, Profile, RunMode};
    /// use rnic_hw_regs::Bus;
    ///
    /// let dev = Device::new(Profile::default(), RunMode::Deterministic);
    /// let bus = dev.bus();
    /// let (a, b) = (bus.alloc_dma(4096).unwrap(), bus.alloc_dma(8192).unwrap());
    /// assert_eq!(dev.dma_mappings(), 2);
    /// bus.free_dma(a).unwrap();
    /// assert_eq!(dev.dma_mappings(), 1);
    /// # bus.free_dma(b).unwrap();
    /// ```
    pub fn dma_mappings(&self) -> usize {
        self.shared.iommu.mappings()
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        let _ = self.stop_capture();
        self.shared.stop.store(true, Ordering::Release);
        if let Some(u) = &self.shared.unparker {
            u.unpark();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rnic_hw_regs::Bus;

    /// Doorbells two host threads ring on the same two threaded devices at once are all
    /// taken: by the thread that rang them, or by the other's drain that held the device
    /// then (see `Drain`), or by the device thread; none waits for good.
    #[test]
    fn doorbells_from_two_threads_are_all_taken() {
        use rnic_hw_regs::doorbell;
        let devs = [
            Device::new(Profile::default(), RunMode::Threaded),
            Device::new(Profile::default(), RunMode::Threaded),
        ];
        const EACH: u64 = 5_000;
        std::thread::scope(|s| {
            for t in 0..2 {
                let buses = [devs[0].bus(), devs[1].bus()];
                s.spawn(move || {
                    for i in 0..EACH {
                        // An EQ doorbell naming no EQ: taken, and counted as a bad doorbell.
                        let b = &buses[((i + t) % 2) as usize];
                        b.write32(doorbell::uar_bar_offset(0x10) + doorbell::UAR_EQ_UPDATE, 0);
                    }
                });
            }
        });
        let taken = || devs.iter().map(|d| d.counters().bad_doorbells).sum::<u64>();
        // The device threads take what no host thread did within their next wake-up.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while taken() < 2 * EACH && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(taken(), 2 * EACH);
        assert!(devs.iter().all(|d| d.shared.pending.is_empty()));
        assert!(
            devs.iter()
                .all(|d| d.shared.drainer.load(Ordering::SeqCst) == 0)
        );
    }

    #[test]
    fn threaded_device_runs_and_stops() {
        let dev = Device::new(Profile::default(), RunMode::Threaded);
        let bus = dev.bus();
        assert_eq!(bus.read32(0x004) >> 16, 5);
        drop(dev);
        // The bus handle outlives the device and still answers register reads.
        assert_eq!(bus.read32(0x004) >> 16, 5);
    }

    /// A threaded device that is idle runs a doorbell in the writer's thread, before the
    /// write returns; no device thread is needed for it.
    #[test]
    fn an_idle_threaded_device_runs_a_doorbell_in_the_writers_thread() {
        let dev = Device::new(Profile::default(), RunMode::Threaded);
        // Let the device thread find nothing to do and park.
        std::thread::sleep(Duration::from_millis(20));
        let bus = dev.bus();
        // An EQ doorbell naming no EQ: dropped and counted by the step. The thread wakes
        // every millisecond and may hold the lock just then (the write then goes to it), so
        // of ten writes most, not necessarily all, are done when they return.
        let mut at_once = 0;
        for i in 1..=10 {
            bus.write32(
                rnic_hw_regs::doorbell::uar_bar_offset(0x10)
                    + rnic_hw_regs::doorbell::UAR_EQ_UPDATE,
                0,
            );
            if dev.counters().bad_doorbells == i {
                at_once += 1;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(
            at_once >= 5,
            "{at_once} of 10 doorbells ran in the writer's thread"
        );
    }

    #[test]
    fn health_counter_follows_virtual_time() {
        let dev = Device::new(Profile::default(), RunMode::Deterministic);
        let bus = dev.bus();
        let a = bus.read32(0x1010);
        dev.advance(Duration::from_millis(10));
        // 10 ms of virtual time, and one tick for the read (a deterministic device's
        // heartbeat also moves when it is read, see `Bar`).
        assert_eq!(bus.read32(0x1010) - a, 10 + 1);
        dev.hang_firmware();
        let b = bus.read32(0x1010);
        dev.advance(Duration::from_millis(10));
        assert_eq!(bus.read32(0x1010), b);
    }
}
