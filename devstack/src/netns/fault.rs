//! The faults a test puts on a host's link, as `tc` rules on both ends of
//! its veth pair: `eth0` inside the namespace (what the host sends) and the
//! outer end on the bridge (what is sent to it).
//!
//! Each end gets an `htb` qdisc whose default class passes everything at
//! line rate, and a second class whose FIFO holds nothing (`pfifo limit
//! 0`): a packet a filter sends there is dropped silently, as on a cut
//! cable, so the peers' TCP waits for its timeouts instead of being
//! refused. Cutting is adding `u32` filters, healing is removing them:
//! connections that outlive a short cut carry on, as they do when a real
//! network heals. (`htb`, `pfifo` and `u32` are what the kernels here
//! have; `prio`, `netem` and the drop action are not in every one, so
//! delay and random loss are the link emulator's, [`super::emulated`].)

use super::{run, Host, NetError};

/// The band everything goes to, and the band that drops.
const PASS: &str = "1:1";
const DROP: &str = "1:4";

/// One end of a host's veth pair.
#[derive(Clone, Copy)]
enum End {
    /// `eth0` inside the namespace: the host's outgoing packets.
    Inner,
    /// The end on the bridge: packets going to the host.
    Outer,
}

impl Host {
    /// `tc` with `args` on `end` (`dev` and `parent`/handle are the caller's).
    fn tc(&self, end: End, args: &[&str]) -> Result<(), NetError> {
        let mut full: Vec<&str> = Vec::new();
        if let End::Inner = end {
            full.extend(["-n", &self.netns]);
        }
        full.extend(args.iter().take(2));
        full.extend(["dev", self.device(end)]);
        full.extend(args.iter().skip(2));
        run("tc", &full)
    }

    fn device(&self, end: End) -> &str {
        match end {
            End::Inner => "eth0",
            End::Outer => &self.outer,
        }
    }

    /// Cuts the host off from everything (the root namespace included), in
    /// both directions, until [`heal`](Self::heal).
    pub fn isolate(&self) -> Result<(), NetError> {
        for end in [End::Inner, End::Outer] {
            self.tc(
                end,
                &[
                    "filter", "add", "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match", "u32", "0", "0",
                    "flowid", DROP,
                ],
            )?;
        }
        tracing::info!(host = self.label, "Isolated a test host.");
        Ok(())
    }

    /// Cuts the link between this host and `peer` (another host's address,
    /// or the root namespace's, [`TestNet::root_ip`](super::TestNet::root_ip)),
    /// both ways, until [`heal`](Self::heal); its other links stay up.
    pub fn cut_from(&self, peer: std::net::Ipv4Addr) -> Result<(), NetError> {
        let peer = format!("{peer}/32");
        self.tc(
            End::Inner,
            &[
                "filter", "add", "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match", "ip", "dst", &peer,
                "flowid", DROP,
            ],
        )?;
        self.tc(
            End::Outer,
            &[
                "filter", "add", "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match", "ip", "src", &peer,
                "flowid", DROP,
            ],
        )?;
        tracing::info!(host = self.label, %peer, "Cut a test host from a peer.");
        Ok(())
    }

    /// Removes every cut, and an emulated host's impairment: the host's
    /// link is whole again.
    pub fn heal(&self) -> Result<(), NetError> {
        for end in [End::Inner, End::Outer] {
            // Fails when there is no filter to delete: nothing to undo.
            let _ = self.tc(end, &["filter", "del", "parent", "1:"]);
        }
        if self.is_emulated() {
            self.clear_impairment()?;
        }
        tracing::info!(host = self.label, "Healed a test host.");
        Ok(())
    }
}

/// Puts the qdiscs on both ends of a new host's veth pair.
pub(super) fn prepare(host: &Host) -> Result<(), NetError> {
    for end in [End::Inner, End::Outer] {
        host.tc(end, &["qdisc", "add", "root", "handle", "1:", "htb", "default", "1"])?;
        for class in [PASS, DROP] {
            // A quantum of its own: htb's default, the rate over r2q, is
            // out of its range at this rate and only warns.
            let class_args =
                ["class", "add", "parent", "1:", "classid", class, "htb", "rate", "10gbit", "quantum", "60000"];
            host.tc(end, &class_args)?;
        }
        host.tc(end, &["qdisc", "add", "parent", DROP, "handle", "40:", "pfifo", "limit", "0"])?;
    }
    Ok(())
}
