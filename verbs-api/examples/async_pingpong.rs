//! SENDs bouncing between the emulated pair (`emu0` <-> `emu1`), awaited with tokio: each
//! side's CQ is on a completion channel registered with the runtime's reactor
//! ([`rnic_verbs::AsyncCompletionChannel`]), and every wait is
//! [`rnic_verbs::CompletionQueue::poll_async`], so no thread blocks or spins.
//!
//! ```text
//! cargo run -p rnic-verbs --example async_pingpong --features tokio            # 100 round trips
//! cargo run -p rnic-verbs --example async_pingpong --features tokio -- -n 1000
//! ```

use rnic_verbs::*;
use std::time::Instant;

/// Any failure: a verb's error or a failed completion.
type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The bytes of one message.
const SIZE: usize = 64;

/// One side: an RC QP whose CQ (sends and receives) is on an async completion channel, and a
/// region with a send half and a receive half.
struct Side {
    qp: QueuePair,
    cq: CompletionQueue,
    chan: AsyncCompletionChannel,
    mr: MemoryRegion,
}

impl Side {
    fn open(name: &str) -> Result<Side, Error> {
        let ctx = Context::open(name)?;
        let chan = AsyncCompletionChannel::new(&ctx.create_comp_channel()?)?;
        let cq = ctx.create_cq(16, Some(chan.channel()))?;
        let pd = ctx.alloc_pd()?;
        let qp = pd.create_qp(QpType::Rc, &cq, &cq).build()?;
        let mr = pd.reg_mr(2 * SIZE, AccessFlags::LOCAL_WRITE)?;
        Ok(Side { qp, cq, chan, mr })
    }

    /// Posts a receive into the region's second half.
    fn post_recv(&self, wr_id: u64) -> Result<(), Error> {
        let sgl = [self.mr.sge(SIZE, SIZE as u32)?];
        self.qp.post_recv(&[RecvWr::new(wr_id, &sgl)])
    }

    /// SENDs `msg` from the region's first half.
    fn send(&self, wr_id: u64, msg: &[u8]) -> Result<(), Error> {
        self.mr.write(0, msg)?;
        let sgl = [self.mr.sge(0, msg.len() as u32)?];
        self.qp.post_send(&[SendWr::send(wr_id, &sgl).signaled()])
    }

    /// What the last receive got.
    fn received(&self, len: u32) -> Result<Vec<u8>, Error> {
        let mut v = vec![0u8; len as usize];
        self.mr.read(SIZE, &mut v)?;
        Ok(v)
    }

    /// Awaits completions until one SEND and one receive completed; returns the receive's.
    async fn send_and_recv_done(&self) -> Res<WorkCompletion> {
        let mut wc = [WorkCompletion::default(); 4];
        let (mut sent, mut recv) = (false, None);
        while !sent || recv.is_none() {
            let n = self.cq.poll_async(&self.chan, &mut wc).await?;
            for w in &wc[..n] {
                if w.status() != WcStatus::Success {
                    return Err(format!("completion failed: {w:?}").into());
                }
                match w.opcode() {
                    WcOpcode::Recv => recv = Some(*w),
                    _ => sent = true,
                }
            }
        }
        Ok(recv.expect("loop ends with a receive"))
    }
}

async fn run(iters: u64) -> Res<()> {
    let (ping, pong) = (Side::open("emu0")?, Side::open("emu1")?);
    connect_pair(&ping.qp, &pong.qp, &ConnectOptions::default())?;
    pong.post_recv(0)?;

    // emu1's side: answer each message with its text, "ping" turned into "pong".
    let server = tokio::spawn(async move {
        let mut wc = [WorkCompletion::default(); 4];
        for i in 0..iters {
            // Wait for the ping (the previous pong's SEND completion may come first).
            let got = loop {
                let n = pong.cq.poll_async(&pong.chan, &mut wc).await?;
                if let Some(w) = wc[..n].iter().find(|w| w.opcode() == WcOpcode::Recv) {
                    break *w;
                }
            };
            let text = pong.received(got.byte_len())?;
            let reply = String::from_utf8_lossy(&text).replace("ping", "pong");
            pong.post_recv(i + 1)?;
            pong.send(i, reply.as_bytes())?;
        }
        Ok::<_, Error>(())
    });

    let start = Instant::now();
    for i in 0..iters {
        ping.post_recv(i)?;
        let msg = format!("ping {i}");
        ping.send(i, msg.as_bytes())?;
        let got = ping.send_and_recv_done().await?;
        let reply = ping.received(got.byte_len())?;
        assert_eq!(reply, format!("pong {i}").as_bytes(), "round trip {i}");
    }
    let took = start.elapsed();
    server.await??;
    println!(
        "{iters} round trips of SENDs between emu0 and emu1, awaited with tokio: {:.1} us each",
        took.as_secs_f64() * 1e6 / iters as f64
    );
    Ok(())
}

fn main() -> std::process::ExitCode {
    let mut iters = 100u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next().map(|v| v.parse::<u64>())) {
            ("-n", Some(Ok(n))) if n > 0 => iters = n,
            _ => {
                eprintln!("usage: async_pingpong [-n ITERS]");
                return std::process::ExitCode::from(2);
            }
        }
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("a tokio runtime");
    match rt.block_on(run(iters)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("async_pingpong: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
