//! The sandbox over real HTTP: started in-process on a free port, with a
//! webhook receiver of its own per test.

mod api;
mod helpers;
mod provider_timing;
mod sessions;
mod webhooks;
