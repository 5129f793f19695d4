//! Mixed traffic while faults happen, and what the clients saw.
//!
//! Each client is a few users who come back for more: limits above one and
//! quantities of one or two, so `limit_exceeded` and `duplicate_order`
//! happen; every fourth request carries an `Idempotency-Key` and is sent
//! twice, as a client that lost the answer would; owners read every order
//! right after its `202` (never `404`, through the real separate-process
//! layout), cancel or confirm some at once, and leave others to the hold's
//! expiry. On a priced voucher, owners pay instead of confirming: they ask
//! for the order's payment and pay it at the provider's sandbox, some pay a
//! second checkout of the same order too (a duplicate the platform must
//! refund), others let the payment window close. On a queue-mode voucher
//! a user first takes a place in its waiting room, watches it (long-polls)
//! until the turn comes, and orders with the entry token (retried with the
//! same `Idempotency-Key` as any order; a place that expires is taken
//! again). On a draw, users enter while entries are open, read their
//! entry, and order only once they won (or were promoted as wins lapsed and
//! units came back). What the rooms' clients saw is kept per voucher and checked
//! (`crate::rooms`). An admin keeps adding stock to the small voucher and pausing and
//! resuming the big one, with an `Idempotency-Key` each.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::StatusCode;
use seckill_devstack::{user_token, TEST_ADMIN_TOKEN};
use serde_json::{json, Value};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::checkout::{another_session, intent_id, pay_session};
use crate::rooms::RoomTally;

/// Users per client: each comes back every few requests.
const USERS_PER_CLIENT: usize = 4;
/// Requests of one client before its users are replaced by new ones.
const USERS_GENERATION: usize = 200;
/// Clients of each draw that watch only it.
const DRAW_WATCHERS: usize = 2;
/// How often the admin changes something.
const ADMIN_EVERY: Duration = Duration::from_millis(700);
/// Units the admin adds to the small voucher each time.
const ADDED_UNITS: u64 = 3;

/// An order a client got `202` for: the platform promised it.
#[derive(Clone, Debug)]
pub struct Promised {
    pub order: String,
    pub voucher: String,
    pub user: String,
    pub quantity: u64,
}

/// What the clients saw.
#[derive(Debug, Default)]
pub struct Tally {
    pub requests: u64,
    pub promised: Vec<Promised>,
    /// Rejections by error code (`sold_out`, `limit_exceeded`, ...).
    pub refused: HashMap<String, u64>,
    /// `503`: Redis or the log unavailable; nothing admitted.
    pub unavailable: u64,
    /// Orders a `503` named as possibly admitted (the gate could not be
    /// asked): the only orders besides the promised ones the log may hold,
    /// with those of requests that got no answer.
    pub named_in_503: HashSet<String>,
    /// No answer (the ingress was down or died mid-request).
    pub no_answer: u64,
    /// Retries with an `Idempotency-Key` answered `202` with the first order.
    pub retries_answered_alike: u64,
    /// Orders whose owner's cancellation was accepted (`202` or `200`).
    pub cancel_requested: HashSet<String>,
    /// Orders whose owner's confirmation was accepted.
    pub confirm_requested: HashSet<String>,
    /// When each accepted confirmation was answered (this host's clock; the
    /// ingress stamps the claim before it answers): a claim answered before
    /// `pay_by` was asked in time and must win.
    pub confirm_asked_at: HashMap<String, chrono::DateTime<chrono::Utc>>,
    /// Admin changes answered `200`, and answered otherwise (`503`, none).
    pub admin_changes: (u64, u64),
    /// Orders of priced vouchers, with every payment the provider's sandbox
    /// says it completed for them.
    pub paid: HashMap<String, Vec<String>>,
    /// What the clients of each waiting room and draw saw, by voucher
    /// (`crate::rooms::check`).
    pub rooms: BTreeMap<String, RoomTally>,
}

impl Tally {
    /// Adds what a later round of clients saw.
    pub fn absorb(&mut self, later: Tally) {
        self.requests += later.requests;
        self.promised.extend(later.promised);
        for (code, count) in later.refused {
            *self.refused.entry(code).or_default() += count;
        }
        self.unavailable += later.unavailable;
        self.named_in_503.extend(later.named_in_503);
        self.no_answer += later.no_answer;
        self.retries_answered_alike += later.retries_answered_alike;
        self.cancel_requested.extend(later.cancel_requested);
        self.confirm_requested.extend(later.confirm_requested);
        self.confirm_asked_at.extend(later.confirm_asked_at);
        self.admin_changes.0 += later.admin_changes.0;
        self.admin_changes.1 += later.admin_changes.1;
        for (order, payments) in later.paid {
            self.paid.entry(order).or_default().extend(payments);
        }
        for (voucher, seen) in later.rooms {
            self.rooms.entry(voucher).or_default().absorb(seen);
        }
    }
}

/// Clients and an admin acting until stopped.
pub struct Load {
    stop: CancellationToken,
    actors: JoinSet<()>,
    tally: Arc<Mutex<Tally>>,
    /// The waiting rooms and draws among the vouchers.
    rooms: Vec<String>,
}

/// One client's HTTP plumbing.
#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    base: String,
    /// The payment provider's sandbox.
    sandbox: String,
    /// The vouchers whose orders are paid.
    priced: Arc<HashSet<String>>,
    /// The vouchers whose orders need the waiting room's entry token.
    queued: Arc<HashSet<String>>,
    /// The draws: only their winners order.
    drawn: Arc<HashSet<String>>,
    tally: Arc<Mutex<Tally>>,
}

/// An answer, or none (`502` stands for "no answer").
type Seen = (StatusCode, Value);

impl Client {
    async fn send(&self, request: reqwest::RequestBuilder) -> Seen {
        match request.send().await {
            Ok(response) => {
                let status = response.status();
                (status, response.json::<Value>().await.unwrap_or(Value::Null))
            }
            Err(_) => (StatusCode::BAD_GATEWAY, Value::Null),
        }
    }

    /// Notes what a waiting room's or a draw's route (or an order on it)
    /// answered, when it was not a success.
    fn room_refused(&self, voucher: &str, (status, body): &Seen) {
        let code = body["error"].as_str().unwrap_or_default();
        let mut tally = self.tally.lock().expect("tally");
        tally.rooms.entry(voucher.to_owned()).or_default().refused(status.as_u16(), code);
    }

    /// Notes a turn: an entry token received, or an unused win read.
    fn room_turn(&self, voucher: &str) {
        self.tally.lock().expect("tally").rooms.entry(voucher.to_owned()).or_default().turns += 1;
    }

    async fn order(&self, voucher: &str, user: &str, quantity: u64, key: Option<&str>, entry: Option<&str>) -> Seen {
        let body = match entry {
            Some(entry) => json!({ "quantity": quantity, "entry_token": entry }),
            None => json!({ "quantity": quantity }),
        };
        let mut request = self
            .http
            .post(format!("{}/api/v1/vouchers/{voucher}/orders", self.base))
            .header("authorization", format!("Bearer {}", user_token(user)))
            .json(&body);
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        self.send(request).await
    }

    /// `user`'s entry token for queue-mode `voucher`, as a client holding
    /// a place does: reads it (a read, outside the order rate), takes a new
    /// one only when there is none or it is over, and long-polls a few
    /// times for the turn. None when the turn did not come (yet), the room
    /// answered an error, or nothing is left.
    async fn entry(&self, voucher: &str, user: &str) -> Option<String> {
        let authorization = format!("Bearer {}", user_token(user));
        let me = |wait: &str| {
            let url = format!("{}/api/v1/vouchers/{voucher}/queue/me{wait}", self.base);
            self.http.get(url).header("authorization", &authorization)
        };
        let (status, mut seen) = self.send(me("")).await;
        let over = seen["state"] == "expired" || seen["order_id"].is_string();
        if status == StatusCode::NOT_FOUND || (status == StatusCode::OK && over) {
            let join = self.http.post(format!("{}/api/v1/vouchers/{voucher}/queue", self.base));
            let (status, body) = self.send(join.header("authorization", &authorization)).await;
            if !matches!(status.as_u16(), 200 | 201) {
                self.room_refused(voucher, &(status, body));
                return None;
            }
            seen = body;
        } else if status != StatusCode::OK {
            self.room_refused(voucher, &(status, seen));
            return None;
        }
        for _ in 0..4 {
            match seen["state"].as_str() {
                Some("your_turn") => {
                    let token = seen["entry_token"].as_str().map(str::to_owned);
                    if token.is_some() {
                        self.room_turn(voucher);
                    }
                    return token;
                }
                Some("waiting") => {}
                // Sold out, or expired since: the next round tries again.
                _ => return None,
            }
            let (status, body) = self.send(me("?wait=2s")).await;
            if status != StatusCode::OK {
                self.room_refused(voucher, &(status, body));
                return None;
            }
            seen = body;
        }
        None
    }

    /// Whether `user` holds an unused win of draw `voucher`, as an entrant
    /// reading their entry sees it; one not entered yet enters (while
    /// entries are open: after, the draw refuses it with `draw_closed`).
    async fn won(&self, voucher: &str, user: &str) -> bool {
        let authorization = format!("Bearer {}", user_token(user));
        let url = format!("{}/api/v1/vouchers/{voucher}/entries/me", self.base);
        let (status, seen) = self.send(self.http.get(url).header("authorization", &authorization)).await;
        if status != StatusCode::OK {
            self.room_refused(voucher, &(status, seen));
            return false;
        }
        match seen["state"].as_str() {
            Some("not_entered") => {
                let enter = self.http.post(format!("{}/api/v1/vouchers/{voucher}/entries", self.base));
                let (status, body) = self.send(enter.header("authorization", &authorization)).await;
                if !matches!(status.as_u16(), 200 | 201) {
                    self.room_refused(voucher, &(status, body));
                }
                false
            }
            Some("won" | "promoted") if seen["order_id"].is_null() => {
                self.room_turn(voucher);
                true
            }
            _ => false,
        }
    }

    /// The owner reads `order` at once: never `404` from its `202` on,
    /// whichever ingress answers.
    async fn read(&self, order: &str, user: &str) {
        let request = self
            .http
            .get(format!("{}/api/v1/orders/{order}", self.base))
            .header("authorization", format!("Bearer {}", user_token(user)));
        let (status, body) = self.send(request).await;
        assert_ne!(status, StatusCode::NOT_FOUND, "an owner's order is never 404 after its 202: {body}");
        if status == StatusCode::OK {
            assert_eq!(body["order_id"].as_str(), Some(order), "{body}");
        }
    }

    /// The owner cancels or confirms `order` at once.
    async fn act(&self, order: &str, user: &str, action: &str) {
        let request = self
            .http
            .post(format!("{}/api/v1/orders/{order}/{action}", self.base))
            .header("authorization", format!("Bearer {}", user_token(user)));
        let (status, body) = self.send(request).await;
        // The ingress stamped the request before it answered: answered
        // before pay_by, it was asked in time.
        let asked_at = chrono::Utc::now();
        assert_ne!(status, StatusCode::NOT_FOUND, "an owner's order is never 404 after its 202: {body}");
        if status == StatusCode::ACCEPTED || status == StatusCode::OK {
            let mut tally = self.tally.lock().expect("tally");
            let requested = if action == "cancel" { &mut tally.cancel_requested } else { &mut tally.confirm_requested };
            requested.insert(order.to_owned());
            if action == "confirm" {
                tally.confirm_asked_at.insert(order.to_owned(), asked_at);
            }
        }
    }

    /// The owner pays `order`: asks the ingress for its payment (once the
    /// order is `CREATED`) and completes it at the sandbox; with `twice`,
    /// also pays a second checkout made at the provider for the same order
    /// (the platform must refund one of the two).
    async fn pay(&self, order: &str, user: &str, twice: bool) {
        // As a buyer's page does: wait for the order to be created (reads
        // are not rate limited), then ask for its payment.
        for _ in 0..40 {
            let request = self
                .http
                .get(format!("{}/api/v1/orders/{order}?wait=2s&status=PENDING", self.base))
                .header("authorization", format!("Bearer {}", user_token(user)));
            let (status, body) = self.send(request).await;
            if status == StatusCode::OK && body["status"] != "PENDING" {
                break;
            }
        }
        let (mut payment, mut amount) = (None, 0);
        for _ in 0..20 {
            let request = self
                .http
                .post(format!("{}/api/v1/orders/{order}/payment", self.base))
                .header("authorization", format!("Bearer {}", user_token(user)));
            let (status, body) = self.send(request).await;
            match status {
                StatusCode::OK => {
                    payment = body["payment_id"].as_str().map(str::to_owned);
                    amount = body["amount"].as_u64().expect("a payment names its amount");
                    break;
                }
                StatusCode::CONFLICT => {
                    // Only the order's own state may refuse it: closed or
                    // paid since, or its checkout already paid.
                    let code = body["error"].as_str().unwrap_or_default();
                    assert!(
                        matches!(
                            code,
                            "not_payable" | "already_paid" | "payment_window_closed" | "payment_in_progress"
                        ),
                        "asking for a payment answered 409 {body}"
                    );
                    return;
                }
                StatusCode::NOT_FOUND => panic!("an owner's order is never 404 after its 202: {body}"),
                status => assert!(
                    matches!(status.as_u16(), 429 | 502 | 503),
                    "asking for a payment answered {status}: {body}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        let Some(payment) = payment else { return };
        self.complete(order, &payment).await;
        if twice {
            let voucher = self.voucher_of(order);
            if let Some(second) = another_session(&self.http, &self.sandbox, &voucher, order, amount).await {
                self.complete(order, &second).await;
            }
        }
    }

    /// Pays the checkout `session` at the sandbox; counted, by the payment
    /// it made, when the sandbox completed it.
    async fn complete(&self, order: &str, session: &str) {
        if let Some(intent) = pay_session(&self.http, &self.sandbox, session).await {
            self.tally
                .lock()
                .expect("tally")
                .paid
                .entry(order.to_owned())
                .or_default()
                .push(intent_id(&intent).to_owned());
        }
    }

    fn voucher_of(&self, order: &str) -> String {
        let tally = self.tally.lock().expect("tally");
        tally.promised.iter().rev().find(|p| p.order == order).map(|p| p.voucher.clone()).unwrap_or_default()
    }

    /// One client's loop: users of its own ordering, retrying, acting.
    async fn run(self, round: String, client: usize, vouchers: Vec<String>, pause: Duration, stop: CancellationToken) {
        for n in 0.. {
            if stop.is_cancelled() {
                return;
            }
            let voucher = &vouchers[n % vouchers.len()];
            // Users come back for more until they hold every limit (then all
            // they get is `duplicate_order`); a new generation keeps the
            // sale going however long a fault takes.
            let mut user = format!("{round}{client}-{}-{}", n / USERS_GENERATION, n % USERS_PER_CLIENT);
            if self.drawn.contains(voucher) {
                // A draw's entrants are the first seconds' users: the same
                // ones come back, in every round, to read and spend their wins.
                user = format!("entrant{client}-{}", n % USERS_PER_CLIENT);
            }
            let quantity = 1 + (n as u64 / USERS_PER_CLIENT as u64) % 2;
            let key = (n % 4 == 0).then(|| format!("{round}{client}-{n}"));
            let entry = if self.queued.contains(voucher) {
                match self.entry(voucher, &user).await {
                    Some(entry) => Some(entry),
                    None => continue,
                }
            } else {
                None
            };
            if self.drawn.contains(voucher) && !self.won(voucher, &user).await {
                tokio::time::sleep(pause).await;
                continue;
            }
            let seen = self.order(voucher, &user, quantity, key.as_deref(), entry.as_deref()).await;
            if self.queued.contains(voucher) || self.drawn.contains(voucher) {
                if seen.0 == StatusCode::ACCEPTED {
                    self.tally.lock().expect("tally").rooms.entry(voucher.clone()).or_default().admitted += 1;
                } else {
                    self.room_refused(voucher, &seen);
                }
            }
            let order = record(&self.tally, voucher, &user, quantity, seen);
            if let (Some(order), Some(key)) = (&order, &key) {
                // The answer "lost": the same request again must name the same order.
                let (status, body) = self.order(voucher, &user, quantity, Some(key), entry.as_deref()).await;
                if status == StatusCode::ACCEPTED {
                    assert_eq!(body["order_id"].as_str(), Some(order.as_str()), "a retry makes no second order");
                    self.tally.lock().expect("tally").retries_answered_alike += 1;
                }
            }
            if let Some(order) = order {
                self.read(&order, &user).await;
                let priced = self.priced.contains(voucher);
                // Each voucher's own turn, so every voucher sees every action.
                let turn = n / vouchers.len();
                match turn % 6 {
                    0 => self.act(&order, &user, "cancel").await,
                    1 | 2 if priced => self.pay(&order, &user, turn % 12 == 1).await,
                    1 | 2 => self.act(&order, &user, "confirm").await,
                    _ => {}
                }
            }
            tokio::time::sleep(pause).await;
        }
    }

    /// The admin: stock added to `small`, `big` paused and resumed, until
    /// stopped; leaves `big` resumed.
    async fn administer(self, round: String, small: String, big: String, stop: CancellationToken) {
        let mut n = 0u64;
        loop {
            let change = match n % 3 {
                0 => (&small, json!({ "add_stock": ADDED_UNITS })),
                1 => (&big, json!({ "paused": true })),
                _ => (&big, json!({ "paused": false })),
            };
            let paused = n % 3 == 1;
            self.change(change.0, change.1, &format!("{round}admin-{n}")).await;
            n += 1;
            if stop.is_cancelled() && !paused {
                return;
            }
            tokio::time::sleep(ADMIN_EVERY).await;
        }
    }

    /// One admin change, retried with its key until answered.
    async fn change(&self, voucher: &str, body: Value, key: &str) {
        for _ in 0..50 {
            let request = self
                .http
                .patch(format!("{}/api/v1/vouchers/{voucher}", self.base))
                .header("authorization", format!("Bearer {TEST_ADMIN_TOKEN}"))
                .header("idempotency-key", key)
                .json(&body);
            let (status, answer) = self.send(request).await;
            let applied = status == StatusCode::OK;
            {
                let mut tally = self.tally.lock().expect("tally");
                if applied {
                    tally.admin_changes.0 += 1;
                } else {
                    tally.admin_changes.1 += 1;
                }
            }
            if applied {
                return;
            }
            assert!(
                status == StatusCode::SERVICE_UNAVAILABLE || status == StatusCode::BAD_GATEWAY,
                "an admin change answered {status}: {answer}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Load {
    /// `clients` clients cycling over `vouchers` every `pause`, and the
    /// admin changing `vouchers[1]` (stock) and `vouchers[0]` (pause),
    /// against the ingress at `base`, paying priced vouchers' orders at the
    /// sandbox at `sandbox`; users are named from `round`.
    pub fn start(
        http: &reqwest::Client,
        (base, sandbox): (&str, &str),
        round: &str,
        vouchers: &[crate::check::Voucher],
        clients: usize,
        pause: Duration,
    ) -> Self {
        let stop = CancellationToken::new();
        let tally = Arc::new(Mutex::new(Tally::default()));
        let priced = Arc::new(vouchers.iter().filter(|v| v.priced).map(|v| v.id.clone()).collect());
        let queued = Arc::new(vouchers.iter().filter(|v| v.queued).map(|v| v.id.clone()).collect());
        let drawn = Arc::new(vouchers.iter().filter(|v| v.drawn).map(|v| v.id.clone()).collect());
        let rooms = vouchers.iter().filter(|v| v.queued || v.drawn).map(|v| v.id.clone()).collect();
        let vouchers: Vec<String> = vouchers.iter().map(|v| v.id.clone()).collect();
        let client = Client {
            http: http.clone(),
            base: base.to_owned(),
            sandbox: sandbox.to_owned(),
            priced,
            queued,
            drawn,
            tally: Arc::clone(&tally),
        };
        let mut actors = JoinSet::new();
        for n in 0..clients {
            actors.spawn(client.clone().run(round.to_owned(), n, vouchers.clone(), pause, stop.clone()));
        }
        // Each draw also has entrants who watch it alone, as a buyer on the
        // draw's page does: they enter in its first seconds and read their
        // entry often enough to catch a win, however long the other
        // vouchers' calls take in a fault (a confirm waits 10 s for a broker
        // that is down, longer than a win's window). With them a draw has
        // more entrants than wins, so lapsed wins promote the next ranks.
        for (n, draw) in client.drawn.iter().flat_map(|draw| std::iter::repeat_n(draw, DRAW_WATCHERS)).enumerate() {
            actors.spawn(client.clone().run(round.to_owned(), clients + n, vec![draw.clone()], pause, stop.clone()));
        }
        actors.spawn(client.administer(round.to_owned(), vouchers[1].clone(), vouchers[0].clone(), stop.clone()));
        Self { stop, actors, tally, rooms }
    }

    /// How many orders were promised so far (the clients go on).
    pub fn promised_so_far(&self) -> usize {
        self.tally.lock().expect("tally").promised.len()
    }

    /// How many order requests were answered `503` so far.
    pub fn unavailable_so_far(&self) -> u64 {
        self.tally.lock().expect("tally").unavailable
    }

    /// Waits, while the clients go on, until every waiting room and draw
    /// has admitted an order with an entry or a win, or `within` passed (the
    /// rooms' check then says which did not). A draw made as a fault heals,
    /// or whose winners' first orders went unanswered while their ingress
    /// died, needs its winners to come round to it once more.
    pub async fn until_rooms_served(&self, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        while tokio::time::Instant::now() < deadline {
            let served = {
                let tally = self.tally.lock().expect("tally");
                self.rooms.iter().all(|room| tally.rooms.get(room).is_some_and(|seen| seen.admitted > 0))
            };
            if served {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Stops the clients and the admin and returns what they saw.
    pub async fn finish(mut self) -> Tally {
        self.stop.cancel();
        while let Some(joined) = self.actors.join_next().await {
            if let Err(error) = joined {
                std::panic::resume_unwind(error.into_panic());
            }
        }
        std::mem::take(&mut *self.tally.lock().expect("tally"))
    }
}

/// Counts an order request's answer; the order id when it was promised.
fn record(tally: &Mutex<Tally>, voucher: &str, user: &str, quantity: u64, (status, body): Seen) -> Option<String> {
    let mut tally = tally.lock().expect("tally");
    tally.requests += 1;
    match status {
        StatusCode::ACCEPTED => {
            let order = body["order_id"].as_str().expect("a 202 names its order").to_owned();
            let promised =
                Promised { order: order.clone(), voucher: voucher.to_owned(), user: user.to_owned(), quantity };
            tally.promised.push(promised);
            Some(order)
        }
        StatusCode::SERVICE_UNAVAILABLE => {
            // Every 503 is read: the error shape, and the order it may name.
            assert_eq!(body["error"], "unavailable", "a 503 says what it is: {body}");
            tally.unavailable += 1;
            if let Some(order) = body["order_id"].as_str() {
                tally.named_in_503.insert(order.to_owned());
            }
            None
        }
        StatusCode::BAD_GATEWAY => {
            tally.no_answer += 1;
            None
        }
        _ => {
            let code = body["error"].as_str().unwrap_or("unreadable").to_owned();
            assert!(status.is_client_error(), "unexpected answer {status}: {body}");
            *tally.refused.entry(code).or_default() += 1;
            None
        }
    }
}
