//! The read side's routes.

mod conditional;
pub(crate) mod orders;
mod page;
mod streams;
mod time;
mod vouchers;

use std::sync::Arc;

use warp::{Filter, Rejection, Reply};

use crate::routes::Ingress;

/// Every read route.
pub(crate) fn routes(ingress: Arc<Ingress>) -> impl Filter<Extract = (impl Reply,), Error = Rejection> + Clone {
    orders::one(Arc::clone(&ingress))
        .or(vouchers::one(Arc::clone(&ingress)))
        .or(time::route(Arc::clone(&ingress)))
        .or(vouchers::list(Arc::clone(&ingress)))
        .or(orders::of_user(Arc::clone(&ingress)))
        .or(streams::user(Arc::clone(&ingress)))
        .or(streams::voucher(ingress))
        .or(page::routes())
}
