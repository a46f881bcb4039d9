//! The `Drop` of a firmware object (CQ, SRQ, QP, MR): the same teardown as its `destroy`,
//! with the error a destructor cannot return logged instead. Each object's `teardown` runs
//! once (it marks itself done), so `destroy` followed by the drop does nothing twice.

/// Implements `Drop` for `$ty` by `self.teardown()`, logging a failure as
/// "destroying `$what` `self.$id` on drop".
macro_rules! drop_by_teardown {
    ($ty:ty, $what:literal, $id:ident) => {
        impl Drop for $ty {
            fn drop(&mut self) {
                if let Err(e) = self.teardown() {
                    log::warn!(
                        concat!("destroying ", $what, " {:#x} on drop: {}"),
                        self.$id,
                        e
                    );
                }
            }
        }
    };
}
