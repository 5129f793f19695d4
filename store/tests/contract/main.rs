//! The store contracts (stock and view), one suite, every backend.

#![allow(unreachable_pub)]

mod backends;
mod cql_batches;
mod fencing;
mod fixtures;
mod stock;
mod view;

/// Runs every contract test against the backend `$fixture` builds.
macro_rules! suite {
    ($backend:ident, $fixture:expr) => {
        mod $backend {
            use super::backends::*;
            use super::{stock as contract, view};

            #[tokio::test]
            async fn replayed_orders_return_the_first_outcome_and_take_nothing() {
                contract::replayed_orders_return_the_first_outcome_and_take_nothing(&$fixture).await
            }

            #[tokio::test]
            async fn payments_pay_in_time_and_every_other_is_refunded_once_across_reopening() {
                contract::payments_pay_in_time_and_every_other_is_refunded_once_across_reopening(&$fixture).await
            }

            #[tokio::test]
            async fn pauses_and_ends_refuse_orders_accepted_in_them_whatever_the_delivery_order() {
                contract::pauses_and_ends_refuse_orders_accepted_in_them_whatever_the_delivery_order(&$fixture).await
            }

            #[tokio::test]
            async fn the_view_shows_prices_payments_and_refunds_whatever_the_delivery_order() {
                view::the_view_shows_prices_payments_and_refunds_whatever_the_delivery_order(&$fixture).await
            }

            #[tokio::test]
            async fn decisions_survive_reopening_the_store() {
                contract::decisions_survive_reopening_the_store(&$fixture).await
            }

            #[tokio::test]
            async fn a_cancelled_order_returns_its_units_once_and_they_sell_again() {
                contract::a_cancelled_order_returns_its_units_once_and_they_sell_again(&$fixture).await
            }

            #[tokio::test]
            async fn unconfirmed_orders_expire_from_persisted_holds() {
                contract::unconfirmed_orders_expire_from_persisted_holds(&$fixture).await
            }

            #[tokio::test]
            async fn due_holds_are_read_page_after_page() {
                contract::due_holds_are_read_page_after_page(&$fixture).await
            }

            #[tokio::test]
            async fn pending_refunds_are_kept_until_deleted() {
                contract::pending_refunds_are_kept_until_deleted(&$fixture).await
            }

            #[tokio::test]
            async fn added_stock_is_added_once_per_update() {
                contract::added_stock_is_added_once_per_update(&$fixture).await
            }

            #[tokio::test]
            async fn a_redelivered_batch_emits_every_outcome_again_in_order() {
                contract::a_redelivered_batch_emits_every_outcome_again_in_order(&$fixture).await
            }

            #[tokio::test]
            async fn requests_that_overtake_their_order_are_decided_after_it() {
                contract::requests_that_overtake_their_order_are_decided_after_it(&$fixture).await
            }

            #[tokio::test]
            async fn the_per_user_limit_is_checked_against_created_orders() {
                contract::the_per_user_limit_is_checked_against_created_orders(&$fixture).await
            }

            #[tokio::test]
            async fn a_second_order_under_one_idempotency_key_fails_as_a_duplicate() {
                contract::a_second_order_under_one_idempotency_key_fails_as_a_duplicate(&$fixture).await
            }

            #[tokio::test]
            async fn thousands_of_one_vouchers_orders_in_one_batch_are_decided_once() {
                contract::thousands_of_one_vouchers_orders_in_one_batch_are_decided_once(&$fixture).await
            }

            #[tokio::test]
            async fn thousands_of_one_vouchers_events_in_one_batch_count_once() {
                view::thousands_of_one_vouchers_events_in_one_batch_count_once(&$fixture).await
            }

            #[tokio::test]
            async fn the_view_is_the_same_whatever_the_delivery_order() {
                view::the_view_is_the_same_whatever_the_delivery_order(&$fixture).await
            }

            #[tokio::test]
            async fn a_users_orders_are_listed_newest_first_and_bounded() {
                view::a_users_orders_are_listed_newest_first_and_bounded(&$fixture).await
            }

            #[tokio::test]
            async fn the_view_follows_cancellations_updates_and_lists_vouchers_newest_first() {
                view::the_view_follows_cancellations_updates_and_lists_vouchers_newest_first(&$fixture).await
            }
        }
    };
}

suite!(embedded, Embedded::new().await);

/// The same contracts on a real CQL server: the test run's Apache Cassandra
/// 5.0 node (see `seckill-cqltest`), a keyspace per contract.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_contract_holds_on_cql() {
    use backends::Cql;

    let server = seckill_cqltest::TestCql::start().await.expect("Cassandra starts (run scripts/setup)");
    macro_rules! run {
        ($($contract:path),* $(,)?) => {$(
            let started = std::time::Instant::now();
            $contract(&Cql::on(&server)).await;
            println!("cql: {} passed in {:?}", stringify!($contract), started.elapsed());
        )*};
    }
    run!(
        stock::replayed_orders_return_the_first_outcome_and_take_nothing,
        stock::decisions_survive_reopening_the_store,
        stock::a_cancelled_order_returns_its_units_once_and_they_sell_again,
        stock::unconfirmed_orders_expire_from_persisted_holds,
        stock::due_holds_are_read_page_after_page,
        stock::pending_refunds_are_kept_until_deleted,
        stock::added_stock_is_added_once_per_update,
        stock::a_redelivered_batch_emits_every_outcome_again_in_order,
        stock::requests_that_overtake_their_order_are_decided_after_it,
        stock::the_per_user_limit_is_checked_against_created_orders,
        stock::a_second_order_under_one_idempotency_key_fails_as_a_duplicate,
        stock::concurrent_processors_decide_each_order_once,
        stock::thousands_of_one_vouchers_orders_in_one_batch_are_decided_once,
        stock::concurrent_processors_decide_each_order_once_across_bounded_batches,
        stock::payments_pay_in_time_and_every_other_is_refunded_once_across_reopening,
        stock::pauses_and_ends_refuse_orders_accepted_in_them_whatever_the_delivery_order,
        view::the_view_shows_prices_payments_and_refunds_whatever_the_delivery_order,
        view::the_view_is_the_same_whatever_the_delivery_order,
        view::a_users_orders_are_listed_newest_first_and_bounded,
        view::the_view_follows_cancellations_updates_and_lists_vouchers_newest_first,
        view::concurrent_projectors_count_each_transition_once,
        view::thousands_of_one_vouchers_events_in_one_batch_count_once,
    );
    // Faults between a writer's bounded batches, injected by a proxy.
    macro_rules! run_with_server {
        ($($test:path),* $(,)?) => {$(
            let started = std::time::Instant::now();
            $test(&server).await;
            println!("cql: {} passed in {:?}", stringify!($test), started.elapsed());
        )*};
    }
    run_with_server!(
        cql_batches::a_stock_write_failing_between_batches_is_retried_without_deciding_twice,
        cql_batches::a_hold_left_by_a_refused_write_does_not_expire_the_order_early,
        cql_batches::a_view_write_failing_between_batches_is_retried_without_counting_twice,
        fencing::a_zombie_decides_nothing_once_the_new_owner_wrote_the_voucher,
    );
}
