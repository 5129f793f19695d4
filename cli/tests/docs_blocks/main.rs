//! Every fenced shell block of README.md and docs/*.md, pasted into bash
//! against the local run, started as the README says (`seckill dev`, the
//! binary `scripts/dev` builds, from the checkout). A block a test cannot
//! run is marked in its page with `<!-- not run: why -->` (see `blocks`);
//! the test counts those and prints why. What fails a block is in `shell`.
//!
//! Pages run as a reader meets them: the README's first (its Try it sets
//! `base`, `admin`, `alice` and a sale the other pages use), then the
//! walk-throughs together (each a sale of its own), then, one at a time,
//! the pages that read the log or operate the platform ([`AFTER_THE_SALES`]),
//! so the analysts' commands see sales of every mode. Each page starts with
//! the variables the pages before it left.
//!
//! Also: a page whose blocks run a bare `seckill` says where it is
//! (`target/release/seckill`), since `scripts/dev` does not put it on the
//! `PATH`.

mod blocks;
mod local_run;
mod shell;

use std::path::{Path, PathBuf};

use seckill_devstack::TempDir;

use crate::blocks::{runs_bare_seckill, Page};
use crate::local_run::LocalRun;
use crate::shell::{run_page, Outcome};

/// The pages that read what the others did, or change the platform under
/// them (`reconcile`, `loadgen`): run last, one after another.
const AFTER_THE_SALES: [&str; 3] = ["docs/ANALYSTS.md", "docs/OPERATIONS.md", "docs/RUNBOOK.md"];
/// How much of a failing page's output the message shows.
const OUTPUT_TAIL_LINES: usize = 60;

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// README.md, then docs/*.md in name order.
fn pages() -> Vec<Page> {
    let root = repository_root();
    let mut paths = vec![PathBuf::from("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|entry| entry.expect("a docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .map(|path| Path::new("docs").join(path.file_name().expect("a file name")))
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            Page::parse(&path.display().to_string(), &text)
        })
        .collect()
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(OUTPUT_TAIL_LINES)..].join("\n")
}

#[test]
fn every_shell_block_of_the_docs_runs_against_the_local_run() {
    let pages = pages();
    let mut problems: Vec<String> = Vec::new();
    for page in &pages {
        let bare = page.runnable().any(|block| runs_bare_seckill(&block.text));
        if bare && !page.prose.contains("target/release/seckill") {
            problems
                .push(format!("{}: runs a bare `seckill` and never says it is `target/release/seckill`", page.name));
        }
        for block in &page.blocks {
            if block.not_run.as_deref() == Some("") {
                problems.push(format!("{}: a `not run` marker without its reason", block.place()));
            }
        }
    }

    let dir = TempDir::new().expect("a directory");
    let work = dir.path().join("checkout");
    let run = LocalRun::start(&work);
    let session = |page: &Page, states: &[String]| -> Outcome {
        run_page(page, &run.work, &dir.path().join("sessions").join(page.name.replace('/', "_")), states)
    };
    let is_readme = |page: &&Page| page.name == "README.md";
    let reads_after = |page: &&Page| AFTER_THE_SALES.contains(&page.name.as_str());

    let mut outcomes: Vec<(&Page, Outcome)> = Vec::new();
    let readme = pages.iter().find(is_readme).expect("README.md");
    outcomes.push((readme, session(readme, &[])));
    let mut states = vec![outcomes[0].1.state.clone()];
    let walk_throughs: Vec<&Page> =
        pages.iter().filter(|page| !is_readme(page) && !reads_after(page) && page.runnable().count() > 0).collect();
    let walked: Vec<Outcome> = std::thread::scope(|scope| {
        let running: Vec<_> = walk_throughs.iter().map(|page| scope.spawn(|| session(page, &states))).collect();
        running.into_iter().map(|thread| thread.join().expect("a page's session")).collect()
    });
    for (page, outcome) in walk_throughs.into_iter().zip(walked) {
        states.push(outcome.state.clone());
        outcomes.push((page, outcome));
    }
    for name in AFTER_THE_SALES {
        let page = pages.iter().find(|page| page.name == name).expect("a page of AFTER_THE_SALES");
        let outcome = session(page, &states);
        states.push(outcome.state.clone());
        outcomes.push((page, outcome));
    }
    let stopped = run.stop();

    let (mut ran, mut skipped) = (0, 0);
    for page in &pages {
        let outcome = outcomes.iter().find(|(p, _)| p.name == page.name).map(|(_, outcome)| outcome);
        if let Some(outcome) = outcome {
            println!("{}: {} blocks ran in {:.1} s", page.name, outcome.finished, outcome.took.as_secs_f64());
            ran += outcome.finished;
            if !outcome.problems.is_empty() {
                println!("--- {}: the end of its output\n{}\n---", page.name, tail(&outcome.output));
                problems.extend(outcome.problems.iter().cloned());
            }
        }
        for block in page.blocks.iter().filter(|block| block.not_run.is_some()) {
            skipped += 1;
            println!("{}: not run: {}", block.place(), block.not_run.as_deref().unwrap_or_default());
        }
    }
    println!("{ran} blocks ran, {skipped} not run (reasons above)");
    for problem in &problems {
        println!("{problem}");
    }
    assert!(problems.is_empty(), "{} problems with the docs' shell blocks (listed above)", problems.len());
    assert!(stopped, "the local run stopped cleanly on Ctrl-C");
    assert!(ran >= 15, "the docs' shell blocks ran: {ran}");
}
