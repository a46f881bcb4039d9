//! Where a `--loopback` run's two sides run: each pinned to a CPU of its own, as two perftest
//! processes started under `taskset -c 0` and `taskset -c 1` would be.
//!
//! Why: the two sides wait for each other by polling. Left to the scheduler, a thread spawned
//! for the server often starts on the client's core and stays there for a few milliseconds,
//! long enough to be most of a 1000-iteration latency run: `write-lat --loopback` then printed
//! about 3.3 us in three runs of ten and 1.4 us in the others on a 2-core machine, and
//! 1.4 us in ten of ten with the sides pinned apart.

/// The first two CPUs this process may run on, or `None` with fewer than two (or when the
/// mask cannot be read): then nothing is pinned.
///
/// ```
/// if let Some((a, b)) = rnic_tools::affinity::two_cpus() {
///     assert_ne!(a, b);
/// }
/// ```
pub fn two_cpus() -> Option<(usize, usize)> {
    // SAFETY: cpu_set_t is plain data (all zeroes is the empty set); sched_getaffinity writes
    // at most the size given into it.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        set
    };
    let mut cpus = (0..libc::CPU_SETSIZE as usize).filter(|&c| {
        // SAFETY: c < CPU_SETSIZE, the set's size.
        unsafe { libc::CPU_ISSET(c, &set) }
    });
    Some((cpus.next()?, cpus.next()?))
}

/// Pins the calling thread to `cpu`. A failure only costs the placement, so it is logged
/// and otherwise ignored.
///
/// ```
/// if let Some((a, _)) = rnic_tools::affinity::two_cpus() {
///     rnic_tools::affinity::pin_current_thread(a);
/// }
/// ```
pub fn pin_current_thread(cpu: usize) {
    if cpu >= libc::CPU_SETSIZE as usize {
        return;
    }
    // SAFETY: as in two_cpus; cpu < CPU_SETSIZE, checked above.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        log::debug!(
            "could not pin to CPU {cpu}: {}",
            std::io::Error::last_os_error()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_thread_runs_only_on_its_cpu() {
        let Some((_, b)) = two_cpus() else { return };
        std::thread::spawn(move || {
            pin_current_thread(b);
            // SAFETY: as in two_cpus.
            let cpu = unsafe { libc::sched_getcpu() };
            assert_eq!(cpu as usize, b);
            assert_eq!(two_cpus(), None, "one CPU left in the mask");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_cpu_beyond_the_set_is_ignored() {
        pin_current_thread(usize::MAX);
    }
}
