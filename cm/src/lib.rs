//! The InfiniBand Communication Manager (IBTA Vol. 1, chapter 12) for rnic, as rdma_cm uses it
//! on RoCE v2: CM messages are MADs of management class 0x07 in UD packets to QP 1 with Q_Key
//! 0x80010000.
//!
//! This crate is a client of the verbs layer, as librdmacm is of libibverbs. Today it holds
//! the wire formats ([`wire`]): the MAD common header and every CM message (REQ, MRA, REJ,
//! REP, RTU, DREQ, DREP, SIDR REQ, SIDR REP), each a typed `Repr` that parses and emits the
//! 256-byte MAD byte for byte, and rdma_cm's conventions (service IDs from a port space and
//! port, the IP private-data header). The protocol's state machine and the rdma_cm-shaped API
//! come next.
//!
//! ```
//! use rnic_cm::wire::{Mad, Rtu, MAD_LEN};
//!
//! let rtu = Rtu { local_comm_id: 1, remote_comm_id: 2, private_data: [0; Rtu::PRIVATE_DATA_LEN] };
//! let mut mad = [0u8; MAD_LEN];
//! rtu.emit(0x1234, &mut mad);
//! let m = Mad::parse(&mad).unwrap();
//! assert_eq!((m.attr_id, m.transaction_id), (Rtu::ATTR_ID, 0x1234));
//! assert_eq!(Rtu::parse(&mad).unwrap(), rtu);
//! ```

pub mod wire;
