//! The names a [`TestNet`](super::TestNet) gives its bridge, veths and
//! namespaces, and the removal of those a killed run left behind.
//!
//! Every name starts with a tag, `skn<pid>_<n>`: the creating process's id
//! in base 36 and the net's number within it. Interface names are at most
//! 15 bytes, which the tag (at most 11: a pid is below 2^22, five base-36
//! digits) and its suffix keep to. A name whose process no longer runs is
//! a leftover; a live process's names are never touched, whichever test or
//! lane it is.

use super::run;
use crate::leftover::is_alive;

const PREFIX: &str = "skn";

/// The tag of the `net`-th net of process `pid`.
pub(super) fn tag(pid: u32, net: u32) -> String {
    format!("{PREFIX}{}_{}", base36(pid), base36(net))
}

/// The bridge: the tag and `b`.
pub(super) fn bridge(tag: &str) -> String {
    format!("{tag}b")
}

/// The veth end of host `index` in the root namespace: the tag, `v` and
/// the index.
pub(super) fn veth(tag: &str, index: usize) -> String {
    format!("{tag}v{index}")
}

/// The TAP device of emulated host `index` on the bridge: the tag, `t`
/// and the index.
pub(super) fn tap(tag: &str, index: usize) -> String {
    format!("{tag}t{index}")
}

/// The TAP device of emulated host `index` that becomes its `eth0`, by
/// this name until moved into its namespace: the tag, `u` and the index.
pub(super) fn tap_inner(tag: &str, index: usize) -> String {
    format!("{tag}u{index}")
}

/// The namespace of host `index` (no length limit; the index keeps it
/// unique, whatever label the test gives the host).
pub(super) fn netns(tag: &str, index: usize) -> String {
    format!("{tag}-h{index}")
}

/// The process that made `name`, if it is one of ours.
fn owner(name: &str) -> Option<u32> {
    let (pid, _) = name.strip_prefix(PREFIX)?.split_once('_')?;
    u32::from_str_radix(pid, 36).ok()
}

fn base36(mut n: u32) -> String {
    let mut digits = Vec::new();
    loop {
        digits.push(char::from_digit(n % 36, 36).expect("below 36"));
        n /= 36;
        if n == 0 {
            break;
        }
    }
    digits.iter().rev().collect()
}

/// Removes the namespaces, veths and bridges whose process is gone,
/// saying so in the log. Best effort: what cannot be listed or removed
/// stays, and a new net never reuses its names or its subnet anyway.
pub(super) fn remove_leftovers() {
    let list = |args: &[&str]| {
        std::process::Command::new("ip")
            .args(args)
            .output()
            .map(|output| String::from_utf8_lossy(&output.stdout).into_owned())
            .unwrap_or_default()
    };
    let stale = |name: &str| owner(name).is_some_and(|pid| !is_alive(pid));
    // `ip netns list`: "NAME" or "NAME (id: 3)" per line.
    for netns in list(&["netns", "list"]).lines().filter_map(|line| line.split_whitespace().next()) {
        if stale(netns) {
            tracing::warn!(netns, "Removing a test host left by a killed run.");
            let _ = run("ip", &["netns", "del", netns]);
        }
    }
    // `ip -o link show`: "3: NAME@PEER: <…" or "3: NAME: <…". Veths and
    // TAP devices (`tun`: an emulator's, which go with its process unless
    // made persistent, or caught between creation and a move) before
    // bridges, though deleting a bridge frees its ports anyway.
    for kind in ["veth", "tun", "bridge"] {
        for line in list(&["-o", "link", "show", "type", kind]).lines() {
            let Some(name) = line.split(": ").nth(1).and_then(|name| name.split('@').next()) else { continue };
            if stale(name) {
                tracing::warn!(link = name, "Removing a test network link left by a killed run.");
                let _ = run("ip", &["link", "del", name]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_an_interface_and_name_their_process() {
        let largest = tag(4_194_304, 1_295);
        assert!(bridge(&largest).len() <= 15 && veth(&largest, 99).len() <= 15, "{largest}");
        assert!(tap(&largest, 99).len() <= 15 && tap_inner(&largest, 99).len() <= 15, "{largest}");
        assert_eq!(owner(&veth(&tag(4_194_304, 7), 3)), Some(4_194_304));
        assert_eq!(owner(&netns(&tag(42, 0), 1)), Some(42));
        assert_eq!(owner(&tap(&tag(42, 0), 1)), Some(42));
        assert_eq!(owner("eth0"), None);
        assert_eq!(owner("sknot-ours"), None);
        assert_eq!(owner("sknabc"), None);
    }
}
