//! The books as `GET /sandbox/ledger` shows them: every object, each
//! intent's refunds and refund calls, and each session in brief.

use seckill_payments::types::{SessionPaymentStatus, SessionStatus};
use seckill_payments::PaymentIntent;
use serde::Serialize;

use super::attempts::RefundAttempts;
use super::{Ledger, RefundRecord};

/// Everything the sandbox holds, in creation order.
#[derive(Debug, Serialize)]
pub(crate) struct Audit {
    pub(crate) payment_intents: Vec<PaymentIntent>,
    pub(crate) refunds: Vec<RefundRecord>,
    /// Per intent refunded or asked to be: its refunds and refund calls.
    pub(crate) refunds_by_payment_intent: Vec<IntentRefunds>,
    pub(crate) checkout_sessions: Vec<SessionLine>,
}

/// One intent's refunds and the calls that asked for them.
#[derive(Debug, Serialize)]
pub(crate) struct IntentRefunds {
    pub(crate) payment_intent: String,
    pub(crate) refunds: Vec<RefundLine>,
    pub(crate) attempts: RefundAttempts,
}

#[derive(Debug, Serialize)]
pub(crate) struct RefundLine {
    pub(crate) id: String,
    pub(crate) status: String,
}

/// A session in brief.
#[derive(Debug, Serialize)]
pub(crate) struct SessionLine {
    pub(crate) id: String,
    pub(crate) status: SessionStatus,
    pub(crate) payment_status: SessionPaymentStatus,
    pub(crate) order_id: Option<String>,
    pub(crate) payment_intent: Option<String>,
    pub(crate) expires_at: i64,
}

impl Ledger {
    /// The books as they are.
    pub(crate) fn audit(&self) -> Audit {
        let refunds_by_payment_intent = self
            .intents
            .iter()
            .filter(|intent| {
                self.refunds_by_intent.contains_key(&intent.id) || self.refund_attempts.contains_key(&intent.id)
            })
            .map(|intent| IntentRefunds {
                payment_intent: intent.id.clone(),
                refunds: self
                    .refunds_for(&intent.id)
                    .into_iter()
                    .map(|record| RefundLine { id: record.refund.id, status: record.refund.status })
                    .collect(),
                attempts: self.refund_attempts.get(&intent.id).cloned().unwrap_or_default(),
            })
            .collect();
        let checkout_sessions = self
            .sessions
            .iter()
            .map(|record| {
                let session = &record.session;
                SessionLine {
                    id: session.id.clone(),
                    status: session.status,
                    payment_status: session.payment_status,
                    order_id: session.order_id().map(str::to_owned),
                    payment_intent: session.payment_intent_id().map(str::to_owned),
                    expires_at: session.expires_at,
                }
            })
            .collect();
        Audit {
            payment_intents: self.intents.clone(),
            refunds: self.refunds.clone(),
            refunds_by_payment_intent,
            checkout_sessions,
        }
    }
}
