//! Every script refuses arguments it cannot act on with an error naming
//! itself and the problem, before it touches a key: a caller's bug (or a
//! hand-run script) changes nothing.

use redis::Script;

use crate::{unique_prefix, Harness};

/// A script's text, by file name, as the gate loads it.
fn script(name: &str) -> Script {
    let text = match name {
        "admit.lua" => preluded!("window_time.lua" => "admit.lua"),
        "freeze_transfers.lua" => include_str!("../../../lua/freeze_transfers.lua"),
        "load_voucher.lua" => include_str!("../../../lua/load_voucher.lua"),
        "draw_advance.lua" => preluded!("window_time.lua", "window_clock.lua" => "draw_advance.lua"),
        "draw_enter.lua" => include_str!("../../../lua/draw_enter.lua"),
        "draw_status.lua" => preluded!("window_time.lua" => "draw_status.lua"),
        "queue_advance.lua" => preluded!("window_time.lua", "window_clock.lua" => "queue_advance.lua"),
        "queue_join.lua" => preluded!("window_time.lua" => "queue_join.lua"),
        "queue_open.lua" => preluded!("room_fields.lua" => "queue_open.lua"),
        "queue_restore.lua" => preluded!("room_fields.lua", "staged_restore.lua" => "queue_restore.lua"),
        "release.lua" => include_str!("../../../lua/release.lua"),
        "remove_published.lua" => include_str!("../../../lua/remove_published.lua"),
        "restore.lua" => include_str!("../../../lua/restore.lua"),
        "retire_consumers.lua" => include_str!("../../../lua/retire_consumers.lua"),
        "retire_outbox.lua" => include_str!("../../../lua/retire_outbox.lua"),
        "settle.lua" => include_str!("../../../lua/settle.lua"),
        "transfer_debit.lua" => include_str!("../../../lua/transfer_debit.lua"),
        "transfer_finish.lua" => include_str!("../../../lua/transfer_finish.lua"),
        "transfer_settle.lua" => include_str!("../../../lua/transfer_settle.lua"),
        "update_voucher.lua" => include_str!("../../../lua/update_voucher.lua"),
        other => panic!("no script {other}"),
    };
    Script::new(text)
}

/// Runs `name` with `keys` keys (all under `prefix`, one hash tag) and
/// `args`; the error it answers.
async fn refusal(h: &Harness, prefix: &str, name: &str, keys: usize, args: &[&str]) -> String {
    let script = script(name);
    let mut invocation = script.prepare_invoke();
    for i in 0..keys {
        invocation.key(format!("{prefix}:{{t}}:k{i}"));
    }
    for arg in args {
        invocation.arg(*arg);
    }
    match invocation.invoke_async::<redis::Value>(&mut h.connection.clone()).await {
        Err(error) => error.to_string(),
        Ok(answer) => panic!("{name} {args:?} was answered: {answer:?}"),
    }
}

async fn bad_arguments_are_refused_by_name_and_change_nothing(h: &Harness) {
    let prefix = unique_prefix();
    let arity = [
        "admit.lua",
        "draw_advance.lua",
        "draw_enter.lua",
        "draw_status.lua",
        "freeze_transfers.lua",
        "load_voucher.lua",
        "queue_restore.lua",
        "release.lua",
        "remove_published.lua",
        "restore.lua",
        "retire_consumers.lua",
        "retire_outbox.lua",
        "settle.lua",
        "transfer_debit.lua",
        "transfer_finish.lua",
        "transfer_settle.lua",
        "update_voucher.lua",
    ];
    for name in arity {
        let error = refusal(h, &prefix, name, 0, &[]).await;
        assert!(error.contains(name) && error.contains("expects"), "{name}: {error}");
    }

    // The right counts, values that make no sense.
    // One place more than a step may write.
    let too_long: Vec<&str> = ["places", "0"].into_iter().chain(["-1", "u", "1", ""].repeat(1001)).collect();
    let cases: [(&str, usize, Vec<&str>, &str); 21] = [
        (
            "admit.lua",
            10,
            vec!["u", "0", "o", "", "r", "v", "10", "1000", "1", "", "", "", "0", "0", "0", "1", "", "0", "1"],
            "quantity must be a positive integer",
        ),
        ("release.lua", 6, vec!["u", "-1", "o", "", "1000"], "quantity must be a positive integer"),
        (
            "load_voucher.lua",
            10,
            vec!["5", "0", "x", "1", "0", "1000", "1", "5", "0", "", "fcfs", "0"],
            "must be numbers",
        ),
        ("queue_open.lua", 2, vec!["reopen"], "ARGV[1] must be open, open_draw or committed"),
        ("queue_restore.lua", 10, vec!["places", "0", "-1", "u", "1"], "places takes quadruples"),
        ("queue_restore.lua", 10, vec!["room", "0", "seed"], "room 9 values and pairs"),
        ("queue_restore.lua", 10, too_long, "at most 1000 places or holds a call"),
        ("queue_join.lua", 6, vec!["u"], "expects 7 KEYS and 7 ARGV"),
        ("draw_enter.lua", 5, vec!["u"], "expects 6 KEYS and 7 ARGV"),
        ("draw_advance.lua", 7, vec!["id"], "expects 7 KEYS and 5 ARGV"),
        ("draw_status.lua", 1, vec!["u"], "expects 2 KEYS and 1 ARGV"),
        ("queue_advance.lua", 7, vec!["id"], "expects 7 KEYS and 5 ARGV"),
        ("update_voucher.lua", 18, vec!["id", "", "", "0", "0", "0", "0"], "the TTL must be a number, at least 1"),
        ("update_voucher.lua", 18, vec!["id", "2", "", "0", "1000", "0", "0"], "paused must be 1, 0 or empty"),
        ("update_voucher.lua", 18, vec!["id", "", "soon", "0", "1000", "0", "0"], "ends_ms must be a number"),
        ("update_voucher.lua", 18, vec!["id", "", "", "-1", "1000", "0", "0"], "units to add must be non-negative"),
        ("update_voucher.lua", 18, vec!["id", "", "", "0", "1000", "0", "-1"], "the bucket index"),
        ("settle.lua", 2, vec!["", "1000"], "the order id must not be empty"),
        ("transfer_finish.lua", 2, vec!["t", "maybe"], "the outcome must be credited or fenced"),
        ("retire_consumers.lua", 1, vec!["g", "c", "-5"], "the idle bound must be a non-negative number"),
        ("freeze_transfers.lua", 1, vec!["later"], "the time must be a number or empty"),
    ];
    for (name, keys, args, problem) in cases {
        let error = refusal(h, &prefix, name, keys, &args).await;
        assert!(error.contains(name) && error.contains(problem), "{name} {args:?}: {error}");
    }

    let written: Vec<String> =
        redis::cmd("KEYS").arg(format!("{prefix}:*")).query_async(&mut h.connection.clone()).await.expect("KEYS");
    assert!(written.is_empty(), "a refused call wrote {written:?}");
}

crate::on_single_and_cluster! {
    single_only: [bad_arguments_are_refused_by_name_and_change_nothing],
    both: [],
}
