//! Neighbour resolution by rnic itself for a device no kernel netdev stands behind (a VFIO
//! function, an `emu-tap:` device, or an emulated device opened with
//! [`crate::OpenOptions::neighbor_agent`]): the driver's port agent on the device, served by
//! a small thread of the context (it answers ARP, neighbour solicitations and pings while
//! nobody calls a verb), and the wait a verb that needs a MAC does for the answer.

use crate::Gid;
use crate::error::{Error, Result};
use rnic_driver::Hca;
use rnic_driver::net::Resolution;
use rnic_driver::pd::Pd;
use rnic_driver::port_agent::{PortAgent, PortAgentConfig, PortAgentCounters, port_addrs};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the service thread polls the agent's queues (and how long a waiting verb
/// sleeps between two looks).
const SERVICE_PERIOD: Duration = Duration::from_millis(1);

/// The longest a verb waits for a resolution: past the resolver's own give-up time
/// (3 requests 1 s apart), so its typed answer comes first; this only bounds a stuck one.
const RESOLVE_WAIT: Duration = Duration::from_secs(10);

/// The port agent of an open device and the thread that serves it.
pub(crate) struct NeighborService {
    agent: Arc<Mutex<PortAgent>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    epoch: Instant,
}

fn lock(m: &Mutex<PortAgent>) -> MutexGuard<'_, PortAgent> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl NeighborService {
    /// Starts the agent on `hca` (its addresses: the GID table, IPv4 ones on a
    /// `/ipv4_prefix` subnet) and its service thread.
    pub(crate) fn start(hca: &Arc<Hca>, ipv4_prefix: u8) -> Result<NeighborService> {
        let verb = "ibv_open_device";
        let pd = Arc::new(Pd::alloc(hca).map_err(Error::driver(verb))?);
        let addrs = port_addrs(hca, ipv4_prefix);
        let agent = PortAgent::start(&pd, addrs, PortAgentConfig::default())
            .map_err(Error::driver(verb))?;
        let agent = Arc::new(Mutex::new(agent));
        let stop = Arc::new(AtomicBool::new(false));
        let epoch = Instant::now();
        let (a, s) = (agent.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("rnic-neighbor".into())
            .spawn(move || {
                while !s.load(Ordering::Acquire) {
                    lock(&a).poll(ns_since(epoch));
                    std::thread::sleep(SERVICE_PERIOD);
                }
            })
            .map_err(Error::io("ibv_open_device: the neighbour service thread"))?;
        Ok(NeighborService {
            agent,
            stop,
            thread: Some(thread),
            epoch,
        })
    }

    /// The MAC of the neighbour with `gid`: asks for it (ARP for an IPv4-mapped GID, a
    /// neighbour solicitation otherwise) and waits for the answer, or the typed error
    /// naming the address that did not answer.
    pub(crate) fn resolve(&self, gid: &Gid) -> Result<[u8; 6]> {
        let ip = match gid.ipv4() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(std::net::Ipv6Addr::from(gid.0)),
        };
        let deadline = Instant::now() + RESOLVE_WAIT;
        loop {
            let r = lock(&self.agent).resolve(ip, ns_since(self.epoch));
            match r {
                Ok(Resolution::Mac(m)) => return Ok(m),
                Ok(Resolution::Pending) if Instant::now() < deadline => {
                    std::thread::sleep(SERVICE_PERIOD)
                }
                Ok(Resolution::Pending) => {
                    return Err(Error::Unresolved {
                        gid: *gid,
                        why: format!("no answer within {RESOLVE_WAIT:?}"),
                    });
                }
                Err(e) => {
                    return Err(Error::Unresolved {
                        gid: *gid,
                        why: e.to_string(),
                    });
                }
            }
        }
    }

    /// What the agent did so far.
    pub(crate) fn counters(&self) -> PortAgentCounters {
        lock(&self.agent).counters()
    }
}

impl Drop for NeighborService {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            // A thread that panicked has nothing left to stop.
            let _ = t.join();
        }
    }
}

/// Nanoseconds since `epoch` (the agent's clock).
fn ns_since(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
}
