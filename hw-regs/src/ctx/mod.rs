//! Contexts: the structures embedded in command inputs and outputs that describe a queue,
//! a memory key or an address (`mlx5_ifc.h` `*_context` / `*c_bits` structures).

mod ads;
mod qpc;

pub use ads::Ads;
pub use qpc::Qpc;
