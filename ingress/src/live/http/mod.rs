//! The read side's routes.

mod conditional;
mod draw;
pub(crate) mod orders;
mod page;
mod queue;
mod reader;
mod streams;
mod time;
mod vouchers;

use std::sync::Arc;

use warp::{Filter, Rejection, Reply};

use super::Live;
use crate::access::Access;
use crate::room::Rooms;

/// What the read routes answer from, and check callers with.
#[derive(Debug)]
pub(crate) struct Reading {
    pub(crate) live: Arc<Live>,
    pub(crate) access: Arc<Access>,
    /// The waiting rooms, for `queue/me`.
    pub(crate) rooms: Arc<Rooms>,
}

/// Every read route.
pub(crate) fn routes(reading: Arc<Reading>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    orders::one(Arc::clone(&reading))
        .or(vouchers::one(Arc::clone(&reading)))
        .or(time::route(Arc::clone(&reading)))
        .or(vouchers::list(Arc::clone(&reading)))
        .or(orders::of_user(Arc::clone(&reading)))
        .or(streams::user(Arc::clone(&reading)))
        .or(queue::me(Arc::clone(&reading)))
        .or(queue::stream(Arc::clone(&reading)))
        .or(draw::me(Arc::clone(&reading)))
        .or(draw::stream(Arc::clone(&reading)))
        .or(streams::voucher(reading))
        .or(page::routes())
}
