//! The CM agent of one device: it owns the port's GSI QP ([`MadChannel`]) and the
//! chapter-12 [`Endpoint`], feeds the endpoint the MADs received with the agent's clock,
//! sends what it queues, runs its timers and hands its events to the ids they concern.
//!
//! One thread per agent. `MadChannel::recv` has no file descriptor to sleep on, so the
//! thread looks at the GSI receive queue once per slice ([`SLICE_BUSY`] for a second after
//! traffic, [`SLICE_IDLE`] after that) and sleeps on a condition variable in between, which
//! the consumer's calls signal when they queue a MAD; it never spins.
//!
//! Locks: the agent's state, then an id's (never the other way round); an id dropped
//! anywhere only queues itself in `doomed` (a leaf lock) for the thread to end.

use crate::endpoint::{Config, Endpoint};
use crate::event::{MadAddr, Transmit};
use crate::rdma_cm::error::{Error, Result};
use crate::rdma_cm::id::IdInner;
use crate::state::ConnId;
use crate::time::Instant;
use rnic_verbs::{AddressHandle, AhAttr, Context, Gid, MadChannel};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the thread looks at the receive queue while traffic flows.
const SLICE_BUSY: Duration = Duration::from_millis(1);
/// ... and once it has been quiet for [`QUIET`].
const SLICE_IDLE: Duration = Duration::from_millis(5);
const QUIET: Duration = Duration::from_secs(1);
/// How long a stopping agent waits for its last MADs to leave.
const STOP_DRAIN: Duration = Duration::from_secs(1);
/// Receive buffers (and sends outstanding) of the GSI QP.
const GSI_DEPTH: u32 = 64;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What an id leaves to the agent when its last handle goes.
#[derive(Debug)]
pub(crate) struct Doomed {
    pub(crate) conn: Option<ConnId>,
    pub(crate) service_id: Option<u64>,
}

/// The agent's state, behind its lock.
#[derive(Debug)]
pub(crate) struct AgentState {
    pub(crate) ep: Endpoint,
    /// Who hears about each connection.
    pub(crate) routes: HashMap<ConnId, Weak<IdInner>>,
    /// Listening ids by service ID.
    pub(crate) listeners: HashMap<u64, Weak<IdInner>>,
    /// MADs the endpoint queued, for the thread to send.
    outbox: Vec<Transmit>,
}

impl AgentState {
    /// Moves the endpoint's queued MADs to the outbox.
    pub(crate) fn collect_tx(&mut self) {
        while let Some(t) = self.ep.poll_transmit() {
            self.outbox.push(t);
        }
    }
}

#[derive(Debug)]
pub(crate) struct Core {
    pub(crate) ctx: Context,
    pub(crate) state: Mutex<AgentState>,
    wake: Condvar,
    stop: AtomicBool,
    doomed: Mutex<Vec<Doomed>>,
    epoch: std::time::Instant,
    /// The source GID index of the MADs sent (the port's IPv4 GID).
    sgid_index: u8,
}

impl Core {
    /// The agent's clock.
    pub(crate) fn now(&self) -> Instant {
        Instant::from_nanos(u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    /// Wakes the thread (MADs to send).
    pub(crate) fn kick(&self) {
        self.wake.notify_all();
    }

    pub(crate) fn doom(&self, d: Doomed) {
        lock(&self.doomed).push(d);
        self.wake.notify_all();
    }
}

/// The agent of one device, shared by the ids bound to it; the last one to go stops it.
#[derive(Debug)]
pub(crate) struct Agent {
    pub(crate) core: Arc<Core>,
    thread: Option<JoinHandle<()>>,
}

/// Set when an agent's thread has ended, and with it the agent's GSI QP.
#[derive(Debug, Default)]
struct Ended {
    done: Mutex<bool>,
    cv: Condvar,
}

impl Ended {
    fn is_done(&self) -> bool {
        *lock(&self.done)
    }

    fn wait(&self) {
        let mut done = lock(&self.done);
        while !*done {
            done = self.cv.wait(done).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Sets [`Ended`] when dropped: at the end of the agent's thread, unwinding included.
struct SetEnded(Arc<Ended>);

impl Drop for SetEnded {
    fn drop(&mut self) {
        *lock(&self.0.done) = true;
        self.0.cv.notify_all();
    }
}

/// An agent started for a device.
struct Started {
    device: String,
    agent: Weak<Agent>,
    /// Set when its thread has ended.
    ended: Arc<Ended>,
}

/// The agents started, each listed until it is gone and its thread has ended.
static AGENTS: Mutex<Vec<Started>> = Mutex::new(Vec::new());

impl Agent {
    /// The agent of `ctx`'s device, started on first use.
    pub(crate) fn of(ctx: &Context) -> Result<Arc<Agent>> {
        let mut all = lock(&AGENTS);
        for s in all.iter().filter(|s| s.device == ctx.name()) {
            if let Some(a) = s.agent.upgrade() {
                return Ok(a);
            }
            // Its last id just went and it is stopping (sending its last MADs for up to
            // STOP_DRAIN). A port has one GSI QP: the new agent can create its own only
            // once the old one's is destroyed (two threads using one device met this).
            s.ended.wait();
        }
        // An agent still stopping stays listed (whatever device it is of), so that a later
        // call for its device waits for it too.
        all.retain(|s| s.agent.strong_count() > 0 || !s.ended.is_done());
        let ch = MadChannel::open(ctx, 1, GSI_DEPTH)?;
        let dev = ctx.query_device();
        let seed = random_u32();
        let ep = Endpoint::new(Config {
            ca_guid: dev.node_guid,
            comm_id_seed: seed,
            tid_high: seed.rotate_left(16) | 1,
            ..Config::default()
        });
        let sgid_index = ctx
            .ipv4_gid_index()
            .and_then(|i| u8::try_from(i).ok())
            .unwrap_or(0);
        let core = Arc::new(Core {
            ctx: ctx.clone(),
            state: Mutex::new(AgentState {
                ep,
                routes: HashMap::new(),
                listeners: HashMap::new(),
                outbox: Vec::new(),
            }),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            doomed: Mutex::new(Vec::new()),
            epoch: std::time::Instant::now(),
            sgid_index,
        });
        let c = core.clone();
        let ended = Arc::new(Ended::default());
        let set = SetEnded(ended.clone());
        let thread = std::thread::Builder::new()
            .name(format!("rnic-cm {}", ctx.name()))
            .spawn(move || {
                let _set = set;
                run(&c, ch);
            })
            .map_err(|source| Error::Io {
                what: "rdma_cm agent thread",
                source,
            })?;
        let a = Arc::new(Agent {
            core,
            thread: Some(thread),
        });
        all.push(Started {
            device: ctx.name().to_string(),
            agent: Arc::downgrade(&a),
            ended,
        });
        Ok(a)
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.core.stop.store(true, Ordering::Release);
        self.core.kick();
        if let Some(t) = self.thread.take()
            && t.thread().id() != std::thread::current().id()
        {
            let _ = t.join();
        }
    }
}

/// A random 32-bit value without an RNG dependency (the standard library's hasher keys).
pub(crate) fn random_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id().into());
    h.finish() as u32
}

/// The agent thread.
fn run(core: &Core, mut ch: MadChannel) {
    let mut ahs: HashMap<[u8; 16], AddressHandle> = HashMap::new();
    let mut last_traffic = std::time::Instant::now();
    while !core.stop.load(Ordering::Acquire) {
        loop {
            match ch.recv(Duration::ZERO) {
                Ok(Some(m)) => {
                    last_traffic = std::time::Instant::now();
                    let from = MadAddr::cm(m.sgid.0, 0);
                    let from = MadAddr {
                        qpn: m.src_qp,
                        ..from
                    };
                    let mut st = lock(&core.state);
                    let now = core.now();
                    if let Err(e) = st.ep.receive(now, from, &m.mad[..m.len]) {
                        log::debug!("{}: CM MAD not taken: {e}", core.ctx.name());
                    }
                    crate::rdma_cm::id::dispatch(core, &mut st, now);
                }
                Ok(None) => break,
                Err(e) => {
                    log::warn!("{}: GSI receive: {e}", core.ctx.name());
                    break;
                }
            }
        }
        let (tx, wait) = turn(core, last_traffic);
        if !tx.is_empty() {
            last_traffic = std::time::Instant::now();
        }
        for t in tx {
            send(core, &mut ch, &mut ahs, &t);
        }
        let st = lock(&core.state);
        if st.outbox.is_empty()
            && lock(&core.doomed).is_empty()
            && !core.stop.load(Ordering::Acquire)
        {
            let _ = core.wake.wait_timeout(st, wait);
        }
    }
    // Stopping: what the last ids left (a DREP, a REJ, the DREQ of a drop) still goes out,
    // and leaves the port before the GSI QP does.
    let (tx, _) = turn(core, last_traffic);
    for t in tx {
        send(core, &mut ch, &mut ahs, &t);
    }
    if !matches!(ch.drain(STOP_DRAIN), Ok(true)) {
        log::warn!("{}: CM MADs still unsent at stop", core.ctx.name());
    }
}

/// One turn of the agent's work with its state locked: the ids dropped since are ended,
/// the timers run, the events handed to the ids; returns the MADs to send and how long to
/// sleep before the next turn.
fn turn(core: &Core, last_traffic: std::time::Instant) -> (Vec<Transmit>, Duration) {
    let mut st = lock(&core.state);
    let now = core.now();
    let doomed = std::mem::take(&mut *lock(&core.doomed));
    for d in doomed {
        if let Some(sid) = d.service_id {
            st.listeners.remove(&sid);
            let _ = st.ep.unlisten(sid);
        }
        if let Some(id) = d.conn {
            st.routes.remove(&id);
            let _ = st.ep.destroy(now, id);
        }
    }
    st.ep.poll(now);
    crate::rdma_cm::id::dispatch(core, &mut st, now);
    st.collect_tx();
    let tx = std::mem::take(&mut st.outbox);
    let slice = if last_traffic.elapsed() < QUIET {
        SLICE_BUSY
    } else {
        SLICE_IDLE
    };
    let wait = st.ep.poll_at().map_or(slice, |at| (at - now).min(slice));
    (tx, wait)
}

/// Sends one MAD to its destination's QP 1 through a cached address handle; a failure is
/// logged (the CM's retries cover a lost MAD).
fn send(
    core: &Core,
    ch: &mut MadChannel,
    ahs: &mut HashMap<[u8; 16], AddressHandle>,
    t: &Transmit,
) {
    let ah = match ahs.entry(t.to.gid) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(v) => {
            let attr = AhAttr {
                hop_limit: 64,
                ..AhAttr::new(Gid(t.to.gid), core.sgid_index)
            };
            match ch.create_ah(&attr) {
                Ok(ah) => v.insert(ah),
                Err(e) => {
                    log::warn!(
                        "{}: no address handle to {:?}: {e}",
                        core.ctx.name(),
                        attr.dgid
                    );
                    return;
                }
            }
        }
    };
    if let Err(e) = ch.send(ah, &t.mad) {
        log::warn!("{}: GSI send: {e}", core.ctx.name());
    }
}
