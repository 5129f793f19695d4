//! The services' consumer groups as Kafka's group coordinator describes
//! them (`seckill groups`): what an operator sees of a running processor and
//! projector, and of a stopped one.

use seckill_analytics::groups::{describe, table, GroupDescription};

use crate::helpers::{eventually, Platform};

async fn described(platform: &Platform, groups: &[String]) -> Vec<GroupDescription> {
    let (kafka, groups) = (platform.kafka.clone(), groups.to_vec());
    tokio::task::spawn_blocking(move || describe(&kafka, &groups)).await.expect("joined").expect("described")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_show_their_state_members_partitions_and_lag() {
    let mut platform = Platform::start().await;
    let voucher = platform.create_voucher(5, 1).await;
    let (_, body) = platform.order(&voucher, "alice").await;
    platform.wait_final(body["order_id"].as_str().expect("order id")).await;

    let ns = &platform.infra.namespace;
    let names = [format!("{ns}-processor"), format!("{ns}-projector"), format!("{ns}-nobody")];
    let sales = platform.kafka.topics().sales;
    // Stable, one member holding every partition of the sales topic, caught
    // up once the processor's commit (every 500 ms) is in (a partition no
    // record reached has no commit).
    let groups = eventually(|| async {
        let groups = described(&platform, &names).await;
        let processor = &groups[0];
        let caught_up = processor
            .partitions
            .iter()
            .filter(|p| p.topic == sales && p.log_end > 0)
            .all(|p| p.lag == Some(0))
            && processor.partitions.iter().any(|p| p.topic == sales && p.committed.is_some_and(|offset| offset > 0));
        (processor.state == "Stable" && groups[1].state == "Stable" && caught_up).then_some(groups)
    })
    .await;
    let processor = &groups[0];
    assert_eq!(processor.members.len(), 1, "{processor:?}");
    let member = &processor.members[0];
    let held: Vec<&String> = member.assigned.iter().filter(|key| key.starts_with(&format!("{sales}/"))).collect();
    assert_eq!(held.len(), 3, "the one member holds the sales topic's 3 partitions: {member:?}");
    assert!(processor.partitions.iter().filter(|p| p.topic == sales).all(|p| p.member.as_ref() == Some(&member.id)));
    assert_eq!(groups[2].state, "Dead", "a group nobody joined: {:?}", groups[2]);
    assert!(groups[2].members.is_empty() && groups[2].partitions.is_empty());

    let printed = table(&groups);
    assert!(printed.contains(&format!("{ns}-processor  state Stable")), "{printed}");
    assert!(printed.contains(&member.id) && printed.contains(&sales), "{printed}");

    // A processor stopped cleanly leaves the group: Empty, no member, its
    // commits kept.
    platform.processor.take().expect("running").stop().await;
    let stopped = eventually(|| async {
        let groups = described(&platform, &names[..1]).await;
        (groups[0].state == "Empty").then_some(groups)
    })
    .await;
    assert!(stopped[0].members.is_empty(), "{:?}", stopped[0]);
    assert!(stopped[0].partitions.iter().any(|p| p.committed.is_some()), "{:?}", stopped[0]);
}
