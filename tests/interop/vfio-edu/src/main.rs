//! vfio-edu: QEMU's `edu` PCI device (1234:11e8) through [`rnic_driver::vfio::VfioBus`], the
//! bus the mlx5 driver uses on real hardware, against the kernel's VFIO + IOMMU (run in a guest
//! with QEMU's intel-iommu, edu bound to vfio-pci).
//!
//! usage: `vfio-edu [DDDD:BB:DD.F]` (default 0000:00:02.0). One `PASS step ...` / `FAIL step ...`
//! line per step, then `SUMMARY N passed, M failed`; exit status 0 when nothing failed.
//!
//! edu registers are little-endian while [`Bus`] speaks big-endian (ConnectX), so every value
//! crosses the bus byte-swapped: `le32`/`le64` below.

use rnic_driver::vfio::{Hugepages, VfioBus, VfioOptions};
use rnic_hw_regs::Bus;
use std::ptr::NonNull;
use std::time::{Duration, Instant};

const EDU_ID: usize = 0x00;
const EDU_LIVE: usize = 0x04;
const EDU_FACT: usize = 0x08;
const EDU_STATUS: usize = 0x20;
const EDU_IRQ_STATUS: usize = 0x24;
const EDU_IRQ_RAISE: usize = 0x60;
const EDU_IRQ_ACK: usize = 0x64;
const EDU_DMA_SRC: usize = 0x80;
const EDU_DMA_DST: usize = 0x88;
const EDU_DMA_CNT: usize = 0x90;
const EDU_DMA_CMD: usize = 0x98;
/// The device-side DMA buffer (4 KiB inside edu).
const EDU_BUF: u64 = 0x40000;
const DMA_START: u64 = 1;
const DMA_TO_RAM: u64 = 2;
const DMA_IRQ: u64 = 4;
const EDU_DMA_BITS: u8 = 28;
const LEN: usize = 4096;

struct Report {
    t0: Instant,
    pass: u32,
    fail: u32,
}

impl Report {
    fn line(&mut self, ok: bool, step: &str, detail: &str) -> bool {
        if ok {
            self.pass += 1;
        } else {
            self.fail += 1;
        }
        println!(
            "{} {step:<20} [{:7.3}s] {detail}",
            if ok { "PASS" } else { "FAIL" },
            self.t0.elapsed().as_secs_f64()
        );
        ok
    }
}

/// Register values as edu sees them (little-endian) through a big-endian bus.
fn rd(bus: &VfioBus, off: usize) -> u32 {
    bus.read32(off).swap_bytes()
}
fn wr(bus: &VfioBus, off: usize, v: u32) {
    bus.write32(off, v.swap_bytes());
}
fn wr64(bus: &VfioBus, off: usize, v: u64) {
    bus.write64(off, v.swap_bytes());
}

/// Starts one edu DMA of `LEN` bytes and polls until the engine is idle.
fn dma(bus: &VfioBus, src: u64, dst: u64, cmd: u64) -> Option<Duration> {
    wr64(bus, EDU_DMA_SRC, src);
    wr64(bus, EDU_DMA_DST, dst);
    wr64(bus, EDU_DMA_CNT, LEN as u64);
    wr64(bus, EDU_DMA_CMD, DMA_START | cmd);
    let t = Instant::now();
    while rd(bus, EDU_DMA_CMD) & 1 != 0 {
        if t.elapsed() > Duration::from_secs(5) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Some(t.elapsed())
}

/// Host memory the device reaches: reads and writes go through raw pointers only.
fn fill(p: NonNull<u8>, f: impl Fn(usize) -> u8) {
    for i in 0..LEN {
        // SAFETY: `p` points at LEN bytes of DMA memory owned by this program; no DMA is in
        // flight while the CPU writes them.
        unsafe { p.as_ptr().add(i).write_volatile(f(i)) };
    }
}
fn first_diff(a: NonNull<u8>, b: NonNull<u8>) -> Option<usize> {
    // SAFETY: both point at LEN bytes of DMA memory; the device has finished writing them.
    (0..LEN).find(|&i| unsafe {
        a.as_ptr().add(i).read_volatile() != b.as_ptr().add(i).read_volatile()
    })
}
fn all_eq(p: NonNull<u8>, v: u8) -> bool {
    // SAFETY: as in `first_diff`.
    (0..LEN).all(|i| unsafe { p.as_ptr().add(i).read_volatile() } == v)
}

/// Raises interrupts by `trigger`, waits for vector 0, returns (fired, irq_status, wait).
fn irq_round(bus: &VfioBus, trigger: impl FnOnce()) -> (bool, u32, Duration) {
    let t = Instant::now();
    trigger();
    let fired = bus.wait_irq(0, Duration::from_secs(3)).unwrap_or(false);
    let dt = t.elapsed();
    let st = rd(bus, EDU_IRQ_STATUS);
    wr(bus, EDU_IRQ_ACK, st);
    (fired, st, dt)
}

fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "0000:00:02.0".into());
    let mut r = Report {
        t0: Instant::now(),
        pass: 0,
        fail: 0,
    };
    run(&addr, &mut r);
    println!(
        "SUMMARY {} passed, {} failed, total {:.3} s",
        r.pass,
        r.fail,
        r.t0.elapsed().as_secs_f64()
    );
    std::process::exit(i32::from(r.fail > 0));
}

fn run(addr: &str, r: &mut Report) {
    let opts = VfioOptions {
        dma_mask_bits: EDU_DMA_BITS,
        irq_vectors: 1,
        hugepages: Hugepages::Prefer,
        ..VfioOptions::default()
    };
    let bus = match VfioBus::open(addr, opts) {
        Ok(b) => b,
        Err(e) => {
            r.line(false, "open", &format!("VfioBus::open({addr}): {e}"));
            return;
        }
    };
    r.line(
        true,
        "open",
        &format!(
            "{addr}: BAR0 {} KiB mapped, MSI vector 0 fd {:?}",
            bus.bar_len() / 1024,
            bus.irq_fd(0)
        ),
    );

    // ---- registers ----
    let id = rd(&bus, EDU_ID);
    r.line(
        id == 0x010000ed,
        "edu-id",
        &format!("{id:#010x} (want 0x010000ed)"),
    );
    let x = 0x1234_5678u32;
    wr(&bus, EDU_LIVE, x);
    let y = rd(&bus, EDU_LIVE);
    r.line(
        y == !x,
        "edu-liveness",
        &format!("wrote {x:#010x}, read {y:#010x} (want {:#010x})", !x),
    );
    wr(&bus, EDU_FACT, 10);
    let t = Instant::now();
    while rd(&bus, EDU_STATUS) & 1 != 0 && t.elapsed() < Duration::from_secs(2) {}
    let f = rd(&bus, EDU_FACT);
    r.line(f == 3_628_800, "edu-factorial", &format!("10! = {f}"));
    r.line(
        bus.read32(bus.bar_len()) == u32::MAX,
        "bar-bounds",
        "a read past BAR0 returns all ones",
    );

    // ---- DMA memory: two bus allocations and one caller buffer, all inside edu's mask ----
    let (a, b) = match (bus.alloc_dma(LEN), bus.alloc_dma(LEN)) {
        (Ok(a), Ok(b)) => (a, b),
        (ra, rb) => {
            r.line(
                false,
                "alloc-dma",
                &format!("{:?} {:?}", ra.err(), rb.err()),
            );
            return;
        }
    };
    let layout = std::alloc::Layout::from_size_align(LEN, 4096).expect("layout");
    // SAFETY: a non-zero-sized layout; freed below after unmap_dma.
    let user = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) }).expect("alloc");
    // SAFETY: `user` stays allocated and in place until unmap_dma below.
    let c_iova = match unsafe { bus.map_dma(user, LEN) } {
        Ok(i) => i,
        Err(e) => {
            r.line(
                false,
                "map-dma",
                &format!("map_dma of a 4 KiB caller buffer: {e}"),
            );
            return;
        }
    };
    let limit = 1u64 << EDU_DMA_BITS;
    let inside = [a.iova, b.iova, c_iova]
        .iter()
        .all(|&i| i + LEN as u64 <= limit);
    r.line(
        inside,
        "dma-mask",
        &format!("alloc_dma A iova {:#x}, B iova {:#x}, map_dma C iova {c_iova:#x}; all below 2^{EDU_DMA_BITS} = {limit:#x}", a.iova, b.iova),
    );

    // ---- edu's DMA engine both ways ----
    fill(a.vaddr, |i| (i * 7 + 3) as u8);
    fill(b.vaddr, |_| 0);
    match dma(&bus, a.iova, EDU_BUF, 0) {
        Some(dt) => r.line(
            true,
            "dma-ram-to-dev",
            &format!(
                "iova {:#x} -> edu {EDU_BUF:#x}, {LEN} B, {:.1} ms",
                a.iova,
                dt.as_secs_f64() * 1e3
            ),
        ),
        None => r.line(false, "dma-ram-to-dev", "engine still busy after 5 s"),
    };
    for (name, dst, p) in [
        ("dma-dev-to-ram", b.iova, b.vaddr),
        ("dma-dev-to-user", c_iova, user),
    ] {
        match dma(&bus, EDU_BUF, dst, DMA_TO_RAM) {
            Some(dt) => match first_diff(a.vaddr, p) {
                None => r.line(
                    true,
                    name,
                    &format!(
                        "edu {EDU_BUF:#x} -> iova {dst:#x}, {LEN} B identical to A, {:.1} ms",
                        dt.as_secs_f64() * 1e3
                    ),
                ),
                Some(i) => r.line(false, name, &format!("first difference at byte {i}")),
            },
            None => r.line(false, name, "engine still busy after 5 s"),
        };
    }
    // An IOVA inside the mask but mapped to nothing: the IOMMU must block it (the guest logs
    // a DMAR fault) and no mapped buffer may change.
    fill(b.vaddr, |_| 0x5a);
    let unmapped = 0x0ff0_0000u64;
    let done = dma(&bus, EDU_BUF, unmapped, DMA_TO_RAM).is_some();
    r.line(done && all_eq(b.vaddr, 0x5a), "dma-unmapped-iova", &format!("DMA to unmapped iova {unmapped:#x} completed without touching mapped memory (blocked by the IOMMU)"));

    // ---- MSI through the eventfd ----
    let (fired, st, dt) = irq_round(&bus, || wr(&bus, EDU_IRQ_RAISE, 0x1234));
    r.line(
        fired && st == 0x1234,
        "msi-raise",
        &format!(
            "wait_irq(0) fired={fired} after {:.2} ms, irq_status {st:#x}",
            dt.as_secs_f64() * 1e3
        ),
    );
    let (fired, st, dt) = irq_round(&bus, || {
        wr64(&bus, EDU_DMA_SRC, a.iova);
        wr64(&bus, EDU_DMA_DST, EDU_BUF);
        wr64(&bus, EDU_DMA_CNT, 64);
        wr64(&bus, EDU_DMA_CMD, DMA_START | DMA_IRQ);
    });
    r.line(
        fired && st == 0x100,
        "msi-dma-done",
        &format!(
            "DMA-completion interrupt fired={fired} after {:.1} ms, irq_status {st:#x}",
            dt.as_secs_f64() * 1e3
        ),
    );
    // the raw eventfd from irq_fd, as an epoll user would see it
    match bus.irq_fd(0) {
        Some(fd) => {
            wr(&bus, EDU_IRQ_RAISE, 1);
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut p, 1, 3000) };
            let mut v = 0u64;
            // SAFETY: reading 8 bytes from an eventfd into a u64.
            let got = n == 1 && unsafe { libc::read(fd, (&raw mut v).cast(), 8) } == 8;
            wr(&bus, EDU_IRQ_ACK, rd(&bus, EDU_IRQ_STATUS));
            r.line(
                got && v >= 1,
                "msi-irq-fd",
                &format!("poll(irq_fd(0) = {fd}) readable, eventfd count {v}"),
            );
        }
        None => {
            r.line(false, "msi-irq-fd", "irq_fd(0) is None");
        }
    }
    let n = 100;
    let t = Instant::now();
    let got = (0..n)
        .filter(|_| irq_round(&bus, || wr(&bus, EDU_IRQ_RAISE, 1)).0)
        .count();
    r.line(
        got == n,
        "msi-loop",
        &format!(
            "{got}/{n} raise -> eventfd round trips, {:.3} ms each",
            t.elapsed().as_secs_f64() * 1e3 / n as f64
        ),
    );
    let fired = bus.wait_irq(0, Duration::from_millis(300)).unwrap_or(true);
    r.line(
        !fired,
        "msi-quiet",
        "wait_irq(0, 300 ms) = false when nothing was raised",
    );

    // ---- teardown ----
    let u = bus.unmap_dma(c_iova, LEN);
    // SAFETY: unmapped from the IOMMU above; allocated with `layout`.
    unsafe { std::alloc::dealloc(user.as_ptr(), layout) };
    let fa = bus.free_dma(a);
    let fb = bus.free_dma(b);
    r.line(
        u.is_ok() && fa.is_ok() && fb.is_ok(),
        "unmap-free",
        &format!("unmap_dma {u:?}, free_dma {fa:?} {fb:?}"),
    );
    drop(bus);
}
