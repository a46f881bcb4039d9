//! The TCP exchange of rdma-core's `ibv_rc_pingpong` / `ibv_ud_pingpong`
//! (`libibverbs/examples/rc_pingpong.c`, `pp_client_exch_dest` / `pp_server_exch_dest`).
//!
//! The message is ASCII `"%04x:%06x:%06x:%s"` (LID, QPN, PSN, GID as 32 hex digits in wire
//! order, `gid_to_wire_gid`) NUL-terminated: exactly 52 bytes. The client connects and sends its
//! message, then reads the server's and answers `"done\0"`; the server reads the client's
//! message, connects its QP to it (RTR, RTS), sends its own and waits for `"done"`.

use crate::error::ToolError;
use crate::oob;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Size of the message (`sizeof "0000:000000:000000:00000000000000000000000000000000"`).
pub const MSG_LEN: usize = 52;

/// One side's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PpDest {
    /// LID (0 on RoCE).
    pub lid: u16,
    /// QP number.
    pub qpn: u32,
    /// First PSN.
    pub psn: u32,
    /// GID in wire order (all zeros without `-g`).
    pub gid: [u8; 16],
}

impl PpDest {
    /// The 52-byte message.
    pub fn encode(&self) -> [u8; MSG_LEN] {
        let mut s = format!("{:04x}:{:06x}:{:06x}:", self.lid, self.qpn, self.psn);
        for b in self.gid {
            s.push_str(&format!("{b:02x}"));
        }
        let mut out = [0u8; MSG_LEN];
        oob::put_text(&mut out, &s);
        out
    }

    /// Parses the message as `sscanf("%x:%x:%x:%s")` + `wire_gid_to_gid` would.
    pub fn decode(msg: &[u8]) -> Result<PpDest, ToolError> {
        let text = oob::text(msg)
            .ok_or_else(|| ToolError::Protocol("address message is not text".into()))?;
        let bad = || ToolError::Protocol(format!("couldn't parse address message <{text}>"));
        let mut it = text.splitn(4, ':');
        let mut hex = || -> Result<u32, ToolError> {
            it.next()
                .and_then(|x| u32::from_str_radix(x, 16).ok())
                .ok_or_else(bad)
        };
        let lid = hex()? as u16;
        let qpn = hex()?;
        let psn = hex()?;
        let g = it.next().ok_or_else(bad)?;
        if g.len() != 32 {
            return Err(bad());
        }
        let mut gid = [0u8; 16];
        for (i, b) in gid.iter_mut().enumerate() {
            // `get`, not indexing: the peer's text may put a multi-byte character across a
            // pair, which a slice would panic on.
            *b = g
                .get(2 * i..2 * i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(bad)?;
        }
        Ok(PpDest { lid, qpn, psn, gid })
    }
}

fn read_exact(
    s: &mut TcpStream,
    buf: &mut [u8],
    timeout: Duration,
    what: &str,
) -> Result<(), ToolError> {
    s.set_read_timeout(Some(timeout))
        .map_err(|e| ToolError::io(what, e))?;
    s.read_exact(buf).map_err(|e| match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => {
            ToolError::Timeout(timeout, format!("waiting for the peer's {what}"))
        }
        _ => ToolError::io(&format!("reading the peer's {what}"), e),
    })
}

/// The client's side: send ours, read theirs, send "done".
pub fn client_exchange(
    s: &mut TcpStream,
    mine: &PpDest,
    timeout: Duration,
) -> Result<PpDest, ToolError> {
    s.set_write_timeout(Some(timeout))
        .map_err(|e| ToolError::io("socket", e))?;
    s.write_all(&mine.encode())
        .map_err(|e| ToolError::io("couldn't send local address", e))?;
    let mut msg = [0u8; MSG_LEN];
    read_exact(s, &mut msg, timeout, "address")?;
    let rem = PpDest::decode(&msg)?;
    s.write_all(b"done\0")
        .map_err(|e| ToolError::io("couldn't send \"done\"", e))?;
    Ok(rem)
}

/// The server's side: read theirs, let `connect_qp` move the QP to RTS, send ours, read "done".
pub fn server_exchange(
    s: &mut TcpStream,
    mine: &PpDest,
    timeout: Duration,
    connect_qp: impl FnOnce(&PpDest) -> Result<(), ToolError>,
) -> Result<PpDest, ToolError> {
    let mut msg = [0u8; MSG_LEN];
    read_exact(s, &mut msg, timeout, "address")?;
    let rem = PpDest::decode(&msg)?;
    connect_qp(&rem)?;
    s.set_write_timeout(Some(timeout))
        .map_err(|e| ToolError::io("socket", e))?;
    s.write_all(&mine.encode())
        .map_err(|e| ToolError::io("couldn't send local address", e))?;
    let mut done = [0u8; 5];
    read_exact(s, &mut done, timeout, "\"done\"")?;
    if &done[..4] != b"done" {
        return Err(ToolError::Protocol(format!(
            "expected \"done\", got {:?}",
            String::from_utf8_lossy(&done)
        )));
    }
    Ok(rem)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oob::{accept, connect};
    use std::net::TcpListener;

    #[test]
    fn message_golden() {
        let d = PpDest {
            lid: 0,
            qpn: 0x11,
            psn: 0x3a5b2c,
            gid: [
                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xc0, 0xa8, 0x01, 0x0a,
            ],
        };
        let m = d.encode();
        assert_eq!(
            &m[..51],
            b"0000:000011:3a5b2c:00000000000000000000ffffc0a8010a"
        );
        assert_eq!(m[51], 0);
        assert_eq!(PpDest::decode(&m).unwrap(), d);
        assert!(PpDest::decode(b"0000:11:22:abc\0").is_err());
        assert!(PpDest::decode(b"garbage").is_err());
    }

    #[test]
    fn decode_refuses_a_non_ascii_gid_without_panicking() {
        // 32 bytes of GID text whose first pair ends inside a 3-byte character.
        let mut m = b"0000:000011:3a5b2c:".to_vec();
        m.extend_from_slice("\u{20ac}".as_bytes());
        m.extend_from_slice(&[b'0'; 29]);
        m.push(0);
        assert!(matches!(PpDest::decode(&m), Err(ToolError::Protocol(_))));
    }

    #[test]
    fn exchange_both_roles() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let t = Duration::from_secs(5);
        let srv = std::thread::spawn(move || {
            let mut s = accept(&l, t).unwrap();
            let mine = PpDest {
                qpn: 2,
                psn: 3,
                ..PpDest::default()
            };
            let mut seen = None;
            let r = server_exchange(&mut s, &mine, t, |d| {
                seen = Some(*d);
                Ok(())
            })
            .unwrap();
            assert_eq!(seen, Some(r));
            r
        });
        let mut c = connect("127.0.0.1", port, t).unwrap();
        let mine = PpDest {
            qpn: 0xabcdef,
            psn: 0x123456,
            ..PpDest::default()
        };
        let r = client_exchange(&mut c, &mine, t).unwrap();
        assert_eq!((r.qpn, r.psn), (2, 3));
        assert_eq!(srv.join().unwrap(), mine);
    }

    #[test]
    fn timeouts() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let e = accept(&l, Duration::from_millis(50)).unwrap_err();
        assert!(matches!(e, ToolError::Timeout(..)));
        // A server that accepts but never answers.
        let port = l.local_addr().unwrap().port();
        let mut c = connect("127.0.0.1", port, Duration::from_secs(1)).unwrap();
        let e =
            client_exchange(&mut c, &PpDest::default(), Duration::from_millis(100)).unwrap_err();
        assert!(matches!(e, ToolError::Timeout(..)), "{e}");
        // Nobody listening at all.
        drop(c);
        drop(l);
        let e = connect("127.0.0.1", port, Duration::from_millis(200)).unwrap_err();
        assert!(matches!(e, ToolError::Connect(..)), "{e}");
    }
}
