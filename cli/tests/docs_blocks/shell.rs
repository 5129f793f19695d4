//! One page's blocks pasted into one bash, in order, as a reader pastes
//! them into one terminal: variables a block sets are there for the next
//! (and, saved at the end, for the pages that follow). What counts as a
//! block that does not work:
//!
//! * a command that fails (exit status not 0; `set -E -o pipefail` and an
//!   `ERR` trap catch it inside `$(…)` and pipelines too), the rest of the
//!   block still running, as in a terminal;
//! * an HTTP answer 5xx, or none, or a 4xx whose code the block does not
//!   name (a block that shows a refusal says which: "403 not_a_winner"):
//!   `curl` is wrapped to note each answer's status;
//! * a long-poll that ran out its wait (`Seckill-Wait: timeout`) unless the
//!   block says it may: what it waited for had happened before it asked, or
//!   never did, and the reader waited for nothing;
//! * a block the shell never finished (a syntax error ends bash).
//!
//! An event stream (`curl -N`, "Ctrl-C to stop") is cut after
//! [`STREAM_SECONDS`], as the reader's Ctrl-C would.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::blocks::{Block, Page};

/// How long an event stream is read before it is cut.
pub(crate) const STREAM_SECONDS: u32 = 4;
/// The longest one page's blocks may take together (the draws wait ~20 s).
const PAGE_TIMEOUT: Duration = Duration::from_secs(150);

/// What the test defines before a page's blocks: the `curl` wrapper, the
/// `ERR` trap and the bookkeeping. Names start with `__`, apart from a
/// reader's.
const PRELUDE: &str = r#"
exec 2>&1
set -E -o pipefail
__fail() { printf '%s\t%s\t%s\n' "$__block" "$1" "$2" >> "$__DIR/failed"; }
trap '__fail "$?" "$BASH_COMMAND"' ERR
__WRITE_OUT='%{stderr}HTTP %{http_code} %{method} %{url_effective} wait=%header{seckill-wait}\n'
curl() {
  local __stream=0 __arg __rc __err
  for __arg in "$@"; do
    case "$__arg" in --*) ;; -*N*) __stream=1 ;; esac
  done
  # Every command here is in a `||` list: the ERR trap is for the reader's.
  __err="$(mktemp "$__DIR/curl.XXXXXX")" || true
  __rc=0
  if ((__stream)); then
    command curl --max-time "$__STREAM_SECONDS" --write-out "$__WRITE_OUT" "$@" 2>"$__err" || __rc=$?
    # Cut by the time limit, as Ctrl-C would end it: not a failure.
    [ "$__rc" != 28 ] || __rc=0
  else
    command curl --write-out "$__WRITE_OUT" "$@" 2>"$__err" || __rc=$?
  fi
  grep -v '^HTTP ' "$__err" >&2 || true
  { grep '^HTTP ' "$__err" | sed "s/^/$__block\t/" >> "$__DIR/http"; } || true
  rm -f "$__err" || true
  return "$__rc"
}
"#;

/// Saves the reader's variables (lowercase names: bash's own are upper
/// case) for the pages that follow.
const SAVE_STATE: &str = r#"
trap - ERR
for __v in $(compgen -v); do case "$__v" in [a-z]*) declare -p "$__v" ;; esac; done > "$__DIR/state.sh"
"#;

/// What one page's session found.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// `page:line: problem`, one per problem.
    pub(crate) problems: Vec<String>,
    /// The blocks that ran to their end.
    pub(crate) finished: usize,
    /// The variables the page left, as shell (`declare -p` lines).
    pub(crate) state: String,
    /// The session's output, for a failure message.
    pub(crate) output: String,
    pub(crate) took: Duration,
}

/// Runs `page`'s runnable blocks in `work` (the repository as a reader has
/// it after `scripts/dev`), after `states` (earlier pages' variables), in
/// `dir` of its own for the bookkeeping.
pub(crate) fn run_page(page: &Page, work: &Path, dir: &Path, states: &[String]) -> Outcome {
    std::fs::create_dir_all(dir).expect("a directory for the page's session");
    let blocks: Vec<&Block> = page.runnable().collect();
    let mut script = String::from(PRELUDE);
    for state in states {
        script.push_str(state);
        script.push('\n');
    }
    if let Some(shell) = &page.run_with {
        script.push_str("__block=run-with\n");
        script.push_str(shell);
        script.push('\n');
    }
    for (index, block) in blocks.iter().enumerate() {
        script.push_str(&format!("__block={index}\necho; echo \"### {}\"\n", block.place()));
        script.push_str(&block.text);
        script.push_str(&format!("echo {index} >> \"$__DIR/finished\"\n"));
    }
    script.push_str(SAVE_STATE);
    let script_path = dir.join("session.sh");
    std::fs::write(&script_path, &script).expect("writes the session");

    let started = Instant::now();
    let output = Command::new("timeout")
        .arg(PAGE_TIMEOUT.as_secs().to_string())
        .arg("bash")
        .arg(&script_path)
        .current_dir(work)
        .env("__DIR", dir)
        .env("__STREAM_SECONDS", STREAM_SECONDS.to_string())
        .env("PATH", path_with(&work.join("target/release")))
        .output()
        .expect("bash runs");
    let took = started.elapsed();
    // Kept beside the session for a look after a passing run too.
    std::fs::write(dir.join("output.log"), &output.stdout).expect("writes the session's output");
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
    let mut outcome = Outcome {
        state: read("state.sh"),
        output: String::from_utf8_lossy(&output.stdout).into_owned(),
        took,
        ..Outcome::default()
    };
    if output.status.code() == Some(124) {
        outcome.problems.push(format!("{}: its blocks took over {} s", page.name, PAGE_TIMEOUT.as_secs()));
    }
    // The block a bookkeeping line names (`run-with` names the page's marker).
    let block_at = |id: &str| id.parse::<usize>().ok().and_then(|index| blocks.get(index));
    let block_of = |id: &str| block_at(id).map_or_else(|| format!("{} ({id})", page.name), |block| block.place());
    for line in read("failed").lines() {
        let mut fields = line.splitn(3, '\t');
        let (id, status, command) =
            (fields.next().unwrap_or(""), fields.next().unwrap_or(""), fields.next().unwrap_or(""));
        outcome.problems.push(format!("{}: `{command}` exited with status {status}", block_of(id)));
    }
    for line in read("http").lines() {
        let Some((id, answer)) = line.split_once('\t') else { continue };
        let code = answer.split_whitespace().nth(1).unwrap_or("");
        let text = block_at(id).map_or("", |block| block.text.as_str());
        if let Some(problem) = unexpected_status(code, text) {
            outcome.problems.push(format!("{}: {problem}: {answer}", block_of(id)));
        }
        if answer.ends_with(" wait=timeout") && !text.contains("timeout") {
            outcome.problems.push(format!("{}: a long-poll ran out its wait: {answer}", block_of(id)));
        }
    }
    let finished: BTreeSet<usize> = read("finished").lines().filter_map(|line| line.trim().parse().ok()).collect();
    outcome.finished = finished.len();
    for (index, block) in blocks.iter().enumerate() {
        if !finished.contains(&index) {
            outcome.problems.push(format!("{}: the shell did not reach the block's end", block.place()));
        }
    }
    outcome
}

/// Why an HTTP status is wrong for a block whose text is `text`, if it is.
pub(crate) fn unexpected_status(code: &str, text: &str) -> Option<&'static str> {
    match code.as_bytes().first() {
        Some(b'1' | b'2' | b'3') => None,
        Some(b'4') if text.contains(code) => None,
        Some(b'4') => Some("a refusal the block does not show"),
        Some(b'5') => Some("a server error"),
        _ => Some("no answer"),
    }
}

fn path_with(dir: &Path) -> PathBuf {
    let mut paths = vec![dir.to_path_buf()];
    paths.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
    PathBuf::from(std::env::join_paths(paths).expect("a PATH"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_passes_only_when_the_block_names_it() {
        assert_eq!(unexpected_status("202", ""), None);
        assert_eq!(unexpected_status("304", ""), None);
        assert_eq!(unexpected_status("403", "# the other gets 403 not_a_winner"), None);
        assert!(unexpected_status("404", "curl -s $base/x").is_some());
        assert!(unexpected_status("503", "503").is_some());
        assert!(unexpected_status("000", "").is_some());
    }
}
