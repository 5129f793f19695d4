//! A [`ViewReader`] that asks another process's query API: lets an ingress
//! serve status queries when the view lives in a projector it cannot open
//! (the embedded store belongs to one process).

use std::time::Duration;

use async_trait::async_trait;
use seckill_core::{OrderId, UserId, VoucherId};
use seckill_store::{OrderView, StoreError, ViewReader, VoucherView};
use serde::de::DeserializeOwned;
use serde::Deserialize;

/// Reads the view through `GET {base_url}/api/v1/...`.
#[derive(Debug, Clone)]
pub struct RemoteView {
    base_url: String,
    client: reqwest::Client,
}

#[derive(Deserialize)]
struct UserOrders {
    orders: Vec<OrderView>,
}

#[derive(Deserialize)]
struct VoucherPage {
    vouchers: Vec<VoucherView>,
}

impl RemoteView {
    /// Queries the API at `base_url` (e.g. `http://projector:8082`).
    pub fn new(base_url: &str) -> Result<Self, StoreError> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| StoreError::Backend(e.to_string()))?;
        Ok(Self { base_url: base_url.trim_end_matches('/').to_owned(), client })
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<Option<T>, StoreError> {
        let response = self
            .client
            .get(format!("{}{path}", self.base_url))
            .send()
            .await
            .map_err(|e| StoreError::Backend(format!("view query failed: {e}")))?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !response.status().is_success() {
            return Err(StoreError::Backend(format!("view query answered {}", response.status())));
        }
        response.json().await.map(Some).map_err(|e| StoreError::Corrupt(format!("view query body: {e}")))
    }
}

#[async_trait]
impl ViewReader for RemoteView {
    async fn order(&self, order: OrderId) -> Result<Option<OrderView>, StoreError> {
        self.get(&format!("/api/v1/orders/{order}")).await
    }

    async fn user_orders(&self, user: &UserId, limit: usize) -> Result<Vec<OrderView>, StoreError> {
        let page: Option<UserOrders> = self.get(&format!("/api/v1/users/{user}/orders?limit={limit}")).await?;
        Ok(page.map(|p| p.orders).unwrap_or_default())
    }

    async fn voucher(&self, voucher: VoucherId) -> Result<Option<VoucherView>, StoreError> {
        self.get(&format!("/api/v1/vouchers/{voucher}")).await
    }

    async fn vouchers(&self, before: Option<VoucherId>, limit: usize) -> Result<Vec<VoucherView>, StoreError> {
        let before = before.map(|id| format!("&before={id}")).unwrap_or_default();
        let page: Option<VoucherPage> = self.get(&format!("/api/v1/vouchers?limit={limit}{before}")).await?;
        Ok(page.map(|p| p.vouchers).unwrap_or_default())
    }
}
