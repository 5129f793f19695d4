//! Who listens on a port: the kernel's socket tables (`/proc/net/tcp*`)
//! joined with the open files of a process group, so a readiness check
//! knows it reached the server it started and not another one that took
//! the port first (a port handed out is free only until someone binds it).

use std::collections::HashSet;
use std::path::Path;

/// Which process listens on a TCP port, as far as `/proc` tells.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Listener {
    /// A process of the group listens on it.
    Ours,
    /// Some other process does (its pid, when it is readable).
    Other(Option<u32>),
    /// Nobody listens on it.
    Nobody,
    /// `/proc` cannot say (not Linux, or not readable): trust the connect.
    Unknown,
}

/// Whether `port` is listened on by a process of `group` (the process
/// group a started server leads: it and whatever it forked).
pub(crate) fn listener_of(port: u16, group: u32) -> Listener {
    let Some(inodes) = listening_inodes(port) else { return Listener::Unknown };
    if inodes.is_empty() {
        return Listener::Nobody;
    }
    let Ok(processes) = std::fs::read_dir("/proc") else { return Listener::Unknown };
    let mut owner = None;
    for entry in processes.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else { continue };
        if holds_any(&entry.path(), &inodes) {
            if process_group(pid) == Some(group) {
                return Listener::Ours;
            }
            owner = Some(pid);
        }
    }
    Listener::Other(owner)
}

/// The inodes of the sockets listening on `port` (IPv4 and IPv6); `None`
/// when the tables cannot be read.
fn listening_inodes(port: u16) -> Option<HashSet<u64>> {
    const LISTEN: &str = "0A";
    let mut inodes = HashSet::new();
    let mut readable = false;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else { continue };
        readable = true;
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) = (fields.get(1), fields.get(3), fields.get(9)) else {
                continue;
            };
            let local_port = local.rsplit(':').next().and_then(|hex| u16::from_str_radix(hex, 16).ok());
            if *state == LISTEN && local_port == Some(port) {
                if let Ok(inode) = inode.parse() {
                    inodes.insert(inode);
                }
            }
        }
    }
    readable.then_some(inodes)
}

/// Whether the process at `/proc/<pid>` has one of `inodes` open.
fn holds_any(process: &Path, inodes: &HashSet<u64>) -> bool {
    let Ok(files) = std::fs::read_dir(process.join("fd")) else { return false };
    files.flatten().any(|file| {
        std::fs::read_link(file.path())
            .ok()
            .and_then(|target| socket_inode(&target.to_string_lossy()))
            .is_some_and(|inode| inodes.contains(&inode))
    })
}

/// `socket:[12345]` → 12345.
fn socket_inode(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
}

/// The process group of `pid` (field 5 of `/proc/<pid>/stat`, counted after
/// the command name, which may itself hold spaces and parentheses).
fn process_group(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(2)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn a_listener_of_this_process_is_ours_and_a_free_port_has_none() {
        let held = TcpListener::bind("127.0.0.1:0").expect("binds");
        let port = held.local_addr().expect("address").port();
        let own_group = process_group(std::process::id()).expect("readable on Linux");
        assert_eq!(listener_of(port, own_group), Listener::Ours);
        assert_eq!(listener_of(port, own_group + 1), Listener::Other(Some(std::process::id())));
        drop(held);
        assert_eq!(listener_of(port, own_group), Listener::Nobody);
    }

    #[test]
    fn socket_links_parse() {
        assert_eq!(socket_inode("socket:[169]"), Some(169));
        assert_eq!(socket_inode("/dev/null"), None);
        assert_eq!(socket_inode("pipe:[12]"), None);
    }
}
