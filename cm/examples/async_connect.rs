//! An RC connection made with rdma_cm between the emulated pair (`emu0`, 192.0.2.1, the
//! client; `emu1`, 192.0.2.2, the server) in one process, awaited with tokio: every CM event
//! through [`AsyncEventChannel`] and every completion through verbs'
//! [`AsyncCompletionChannel`], so no thread blocks or spins. The client connects with
//! private data, the two exchange a SEND each way, then the client disconnects and both
//! wait out timewait.
//!
//! ```text
//! cargo run -p rnic-cm --example async_connect --features tokio
//! ```

use rnic_cm::cma::ConnParam;
use rnic_cm::rdma_cm::{AsyncEventChannel, CmEvent, CmId, EventChannel, EventKind};
use rnic_cm::wire::ip::PortSpace;
use rnic_verbs::{
    AccessFlags, AsyncCompletionChannel, CompletionQueue, MemoryRegion, QpCap, QueuePair, RecvWr,
    SendWr, WcOpcode, WorkCompletion,
};
use std::sync::Arc;

/// Any failure: an rdma_cm or verbs error, or the peer doing something else.
type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const SERVER: &str = "192.0.2.2:7471";
/// Bytes of a message buffer.
const SIZE: usize = 64;

/// The next event, which must be of `kind`.
async fn expect(ch: &AsyncEventChannel, kind: EventKind) -> Res<CmEvent> {
    let ev = ch.get_event().await?;
    if ev.kind != kind {
        return Err(format!("expected {kind}, got {} (status {})", ev.kind, ev.status).into());
    }
    Ok(ev)
}

/// One side's data path: the id's QP, its CQ on an async completion channel, a buffer.
struct Side {
    qp: Arc<QueuePair>,
    cq: CompletionQueue,
    chan: AsyncCompletionChannel,
    mr: MemoryRegion,
}

impl Side {
    /// Creates the id's QP with its CQ on a completion channel in tokio's reactor, and posts
    /// one receive.
    fn new(id: &CmId) -> Res<Side> {
        let ctx = id.context().ok_or("the id has no device")?;
        let chan = AsyncCompletionChannel::new(&ctx.create_comp_channel()?)?;
        let cq = ctx.create_cq(8, Some(chan.channel()))?;
        let pd = ctx.alloc_pd()?;
        let qp = id.create_qp(&pd, &cq, &cq, QpCap::default())?;
        let mr = pd.reg_mr(2 * SIZE, AccessFlags::LOCAL_WRITE)?;
        qp.post_recv(&[RecvWr::new(1, &[mr.sge(SIZE, SIZE as u32)?])])?;
        Ok(Side { qp, cq, chan, mr })
    }

    /// SENDs `msg` and awaits its completion and the receive; returns what came in.
    async fn send_and_receive(&self, msg: &[u8]) -> Res<Vec<u8>> {
        self.mr.write(0, msg)?;
        let sgl = [self.mr.sge(0, msg.len() as u32)?];
        self.qp.post_send(&[SendWr::send(2, &sgl).signaled()])?;
        let (mut sent, mut got) = (false, None);
        let mut wc = [WorkCompletion::default(); 4];
        while !sent || got.is_none() {
            let n = self.cq.poll_async(&self.chan, &mut wc).await?;
            for w in &wc[..n] {
                if !w.is_success() {
                    return Err(format!("completion failed: {w:?}").into());
                }
                match w.opcode() {
                    WcOpcode::Recv => got = Some(w.byte_len()),
                    _ => sent = true,
                }
            }
        }
        let len = got.unwrap_or(0) as usize;
        Ok(self.mr.to_vec(SIZE, len)?)
    }
}

async fn server(events: AsyncEventChannel) -> Res<()> {
    let listener = CmId::new(events.channel(), PortSpace::Tcp);
    listener.bind_addr(SERVER.parse()?)?;
    listener.listen(1)?;
    let req = expect(&events, EventKind::ConnectRequest).await?;
    let id = req.id.clone();
    println!(
        "server: connect request from {:?} saying {:?}",
        id.peer_addr(),
        String::from_utf8_lossy(&req.param.private_data[..5])
    );
    let side = Side::new(&id)?;
    id.accept(&ConnParam {
        private_data: b"hello".to_vec(),
        responder_resources: 1,
        initiator_depth: 1,
        ..ConnParam::default()
    })?;
    expect(&events, EventKind::Established).await?;
    let got = side.send_and_receive(b"pong").await?;
    println!("server: got {:?}", String::from_utf8_lossy(&got));
    expect(&events, EventKind::Disconnected).await?;
    id.disconnect()?; // the DREP
    expect(&events, EventKind::TimewaitExit).await?;
    drop(listener);
    Ok(())
}

async fn client(events: AsyncEventChannel) -> Res<()> {
    let id = CmId::new(events.channel(), PortSpace::Tcp);
    let timeout = std::time::Duration::from_secs(2);
    // No source address: the route's (the other one of the pair).
    id.resolve_addr(None, SERVER.parse()?, timeout)?;
    expect(&events, EventKind::AddrResolved).await?;
    id.resolve_route(timeout)?;
    expect(&events, EventKind::RouteResolved).await?;
    let side = Side::new(&id)?;
    id.connect(&ConnParam {
        private_data: b"hi rc".to_vec(),
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        ..ConnParam::default()
    })?;
    let est = expect(&events, EventKind::Established).await?;
    println!(
        "client: established, the server says {:?}",
        String::from_utf8_lossy(&est.param.private_data[..5])
    );
    let got = side.send_and_receive(b"ping").await?;
    println!("client: got {:?}", String::from_utf8_lossy(&got));
    if got != b"pong" {
        return Err("the server's message is not pong".into());
    }
    id.disconnect()?; // the DREQ
    expect(&events, EventKind::Disconnected).await?;
    expect(&events, EventKind::TimewaitExit).await?;
    Ok(())
}

async fn run() -> Res<()> {
    let sch = AsyncEventChannel::new(&EventChannel::new()?)?;
    let cch = AsyncEventChannel::new(&EventChannel::new()?)?;
    let srv = tokio::spawn(server(sch));
    // The server listens before the client's REQ comes: a REQ for nothing is refused.
    tokio::task::yield_now().await;
    client(cch).await?;
    srv.await??;
    println!("async_connect: connected, exchanged and disconnected, every wait awaited");
    Ok(())
}

fn main() -> std::process::ExitCode {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("a tokio runtime");
    match rt.block_on(run()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("async_connect: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
