//! The command processor, played from the host side with hand-built commands: the bring-up,
//! every command family's success path and its PRM failure statuses.

mod common;

use common::host::Host;

#[test]
fn host_client_reaches_the_device() {
    let mut h = Host::small();
    let r = h.exec(&rnic_hw_regs::cmd::NopIn::new_cmd(), &[]);
    assert_eq!(r.delivery, 0);
}
