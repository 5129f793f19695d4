//! Stopping and restarting the consumers mid-stream loses and repeats
//! nothing.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use reqwest::StatusCode;

use crate::helpers::{eventually, Platform};

const ORDERS: usize = 300;
const STOCK: u64 = ORDERS as u64 + 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_restarted_mid_stream_finish_every_order_once() {
    let mut platform = Platform::start().await;
    let voucher = platform.create_voucher(STOCK, 1).await;

    // Clients keep ordering while the consumers go down and come back.
    let placed = Arc::new(AtomicUsize::new(0));
    let load = tokio::spawn({
        let (voucher, base, http, placed) =
            (voucher.clone(), platform.base.clone(), platform.http.clone(), Arc::clone(&placed));
        async move {
            futures::stream::iter(0..ORDERS)
                .map(|i| {
                    let (url, http, placed) =
                        (format!("{base}/api/v1/vouchers/{voucher}/orders"), http.clone(), Arc::clone(&placed));
                    async move {
                        let response = http
                            .post(url)
                            .header("authorization", Platform::as_user(&format!("r{i}")))
                            .send()
                            .await
                            .expect("answers");
                        assert_eq!(response.status(), StatusCode::ACCEPTED);
                        let body: serde_json::Value = response.json().await.expect("json");
                        placed.fetch_add(1, Ordering::SeqCst);
                        body["order_id"].as_str().expect("order_id").to_owned()
                    }
                })
                .buffer_unordered(4)
                .collect::<Vec<String>>()
                .await
        }
    });
    let reached = |n: usize| {
        let placed = Arc::clone(&placed);
        eventually(move || {
            let done = placed.load(Ordering::SeqCst) >= n;
            async move { done.then_some(()) }
        })
    };

    reached(ORDERS / 3).await;
    // A graceful stop of the processor, a crash of the projector.
    platform.processor.take().expect("processor running").stop().await;
    platform.projector.take().expect("projector running").abort().await;
    platform.start_processor().await;
    platform.start_projector().await;

    reached(2 * ORDERS / 3).await;
    // And the other way round, while orders still arrive.
    platform.processor.take().expect("processor running").abort().await;
    platform.projector.take().expect("projector running").stop().await;
    platform.start_processor().await;
    platform.start_projector().await;

    let ids = load.await.expect("load finished");
    assert_eq!(ids.len(), ORDERS);
    for id in &ids {
        let order = platform.wait_final(id).await;
        assert_eq!(order["status"], "CREATED", "{order}");
    }
    let shown = platform.wait_voucher(&voucher, |v| v["created"] == ORDERS as u64).await;
    assert_eq!(shown["admitted"], ORDERS as u64, "{shown}");
    assert_eq!(shown["remaining"], STOCK - ORDERS as u64, "{shown}");
    assert_eq!(platform.persistent_remaining(&voucher).await, STOCK - ORDERS as u64, "no decrement applied twice");
    assert_eq!(platform.redis_remaining(&voucher).await, STOCK - ORDERS as u64);
}
