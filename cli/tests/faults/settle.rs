//! The closing check of every fault scenario, one implementation for the
//! fault suite and the partitions lane (which includes this file by path).

use crate::check::{check, Voucher};
use crate::cluster::Cluster;
use crate::load::Tally;

/// Checks the invariants over `tally` and the whole log, then stops every
/// service with SIGTERM and requires a clean exit.
pub async fn settle_tally(cluster: &mut Cluster, vouchers: &[Voucher], tally: Tally, fault: &str) {
    assert!(!tally.promised.is_empty(), "[{fault}] some orders were admitted");
    crate::rooms::check(&tally.rooms, vouchers, fault);
    check(cluster, vouchers, &tally, fault).await;
    for (service, clean) in tokio::task::block_in_place(|| cluster.stop_all()) {
        assert!(clean, "[{fault}] {service:?} did not exit 0 on SIGTERM within 20 s");
    }
}
