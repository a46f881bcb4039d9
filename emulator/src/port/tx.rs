//! The port's transmit side: a frame for one of the device's own GIDs loops back to the
//! port's receive queue, any other goes to the link; both are captured when capturing.

use crate::ctx::Ctx;

/// Sends a frame: looped back when it is for this device, else onto the link. `sealed`:
/// the frame has its ICRC; an unsealed one ([`super::Port::takes_unsealed`]) goes to the
/// link as such, and is sealed when it loops back (the loopback queue holds sealed frames).
pub(crate) fn transmit(ctx: &mut Ctx<'_>, mut frame: Vec<u8>, sealed: bool) {
    ctx.state.counters.frames_tx += 1;
    if let Some(c) = ctx.state.port.capture.as_mut() {
        c.write(ctx.clock.now_ns(), &frame);
    }
    if dest_gid(&frame).is_some_and(|g| is_own_gid(ctx, &g)) {
        if !sealed {
            crate::wire::icrc::seal(&mut frame);
        }
        ctx.state.port.rx.push_back(frame);
    } else {
        let spare = if sealed {
            ctx.state.port.link.transmit_owned(frame)
        } else {
            ctx.state.port.link.transmit_unsealed(frame)
        };
        ctx.state.port.recycle(spare);
    }
}

/// Sends a run of packets in one buffer ([`crate::wire::GsoRun`]) onto the link, counting
/// each packet. Only the requester builds runs, and only when the port takes them
/// ([`super::Port::takes_runs`]) and they are not for the device itself; a run that is
/// (or a port that captures) gets its packets cut out and sent one by one, as frames.
pub(crate) fn transmit_run(ctx: &mut Ctx<'_>, frame: Vec<u8>, run: crate::wire::GsoRun) {
    if ctx.state.port.takes_runs() && !dest_gid(&frame).is_some_and(|g| is_own_gid(ctx, &g)) {
        ctx.state.counters.frames_tx += u64::from(run.count);
        let spare = ctx.state.port.link.transmit_run(frame, run);
        ctx.state.port.recycle(spare);
        return;
    }
    if let Some(mut cut) = crate::link::Cutter::new(&frame, run) {
        loop {
            let mut packet = ctx.state.port.buffer();
            if !cut.next_packet(&frame, &mut packet) {
                ctx.state.port.recycle(packet);
                break;
            }
            transmit(ctx, packet, true);
        }
    } else {
        // The requester's runs describe real packets; one that does not is an internal
        // bug, lost as a frame dropped on the wire.
        ctx.state.counters.tx_dropped += u64::from(run.count);
    }
    ctx.state.port.recycle(frame);
}

/// The destination IP of an Ethernet frame carrying IPv4 or IPv6, as a GID.
pub(super) fn dest_gid(frame: &[u8]) -> Option<[u8; 16]> {
    let mut off = 12;
    let mut ethertype = u16::from_be_bytes([*frame.get(off)?, *frame.get(off + 1)?]);
    if ethertype == 0x8100 {
        off += 4;
        ethertype = u16::from_be_bytes([*frame.get(off)?, *frame.get(off + 1)?]);
    }
    let ip = off + 2;
    let mut gid = [0u8; 16];
    match ethertype {
        0x0800 => {
            gid[10] = 0xFF;
            gid[11] = 0xFF;
            gid[12..].copy_from_slice(frame.get(ip + 16..ip + 20)?);
        }
        0x86DD => gid.copy_from_slice(frame.get(ip + 24..ip + 40)?),
        _ => return None,
    }
    Some(gid)
}

/// Whether `gid` is one of the device's RoCE v2 GIDs.
pub(crate) fn is_own_gid(ctx: &Ctx<'_>, gid: &[u8; 16]) -> bool {
    ctx.state.res.own_v2_gids.contains(gid)
}
