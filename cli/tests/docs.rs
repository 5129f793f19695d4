//! The README and the pages under `docs/` point at each other and at the
//! code. Files get renamed and headings reworded, and a reference left
//! behind fails silently: the reader follows it and finds nothing. This test
//! reads README.md and every docs/*.md, without network, and checks:
//!
//! * every relative Markdown link `[text](target)` resolves: the file exists
//!   and, when the target has a `#anchor`, the Markdown file it names (the
//!   same page for a bare `#anchor`) has a heading with that anchor, by
//!   GitHub's rule (lowercase, spaces to `-`, other punctuation but `-` and
//!   `_` dropped, a repeated heading numbered `-1`, `-2`, ...);
//! * every repository path named in backticks exists: a backticked token
//!   without spaces that starts with one of the repository's top-level
//!   directories (`gate/`, `lua/`, ...; not `target/` or hidden ones), after
//!   dropping a trailing `:line`, `#...` and punctuation. Tokens with `*`,
//!   `{`, `<`, `$` or `…` are patterns or placeholders, not paths, and are
//!   skipped.
//!
//! Code blocks are skipped for both: their contents are commands and
//! examples, not references. Every broken reference is printed with its page
//! and line before the test fails, so one run lists them all.
//!
//! One check reads the code blocks instead: a `seckill …  | jq FILTER`
//! example whose command the command's `--help` also shows, piped to `jq`,
//! must use the filter `--help` shows (a reader who pastes either gets the
//! same answer).

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One Markdown page of the repository.
#[derive(Debug)]
struct Page {
    /// Relative to the repository root, for messages.
    name: String,
    path: PathBuf,
    text: String,
    /// The text with code blocks and inline code blanked to spaces (byte for
    /// byte, so offsets into it are offsets into `text`).
    prose: String,
    /// Byte ranges of the contents of inline code spans.
    code_spans: Vec<Range<usize>>,
}

impl Page {
    fn read(root: &Path, path: PathBuf) -> Page {
        let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let name = path.strip_prefix(root).unwrap_or(&path).display().to_string();
        Page::parse(name, path, text)
    }

    fn parse(name: String, path: PathBuf, text: String) -> Page {
        let without_blocks = blank_code_blocks(&text);
        let code_spans = inline_code_spans(&without_blocks);
        let prose = blank_ranges(&without_blocks, &code_spans);
        Page { name, path, text, prose, code_spans }
    }

    /// The 1-based line of a byte offset, for messages.
    fn line_of(&self, offset: usize) -> usize {
        self.text[..offset].matches('\n').count() + 1
    }
}

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// README.md and every docs/*.md, in a stable order.
fn documentation_pages(root: &Path) -> Vec<PathBuf> {
    let mut pages = vec![root.join("README.md")];
    let docs = fs::read_dir(root.join("docs")).expect("docs/ is readable");
    let mut in_docs: Vec<PathBuf> = docs
        .map(|entry| entry.expect("a docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    in_docs.sort();
    pages.extend(in_docs);
    pages
}

/// The repository's top-level directories a path in the docs may start
/// with: build output and hidden directories are not the repository's own.
fn top_level_directories(root: &Path) -> BTreeSet<String> {
    fs::read_dir(root)
        .expect("the repository root is readable")
        .map(|entry| entry.expect("a root entry"))
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name != "target" && !name.starts_with('.'))
        .collect()
}

/// `text` with every byte of every fenced code block (fences included)
/// turned into a space, newlines kept.
fn blank_code_blocks(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_block = false;
    for line in text.split_inclusive('\n') {
        let is_fence = line.trim_start().starts_with("```");
        if in_block || is_fence {
            // One space per byte, not per character: offsets stay those of `text`.
            out.extend(line.bytes().map(|byte| if byte == b'\n' { '\n' } else { ' ' }));
        } else {
            out.push_str(line);
        }
        if is_fence {
            in_block = !in_block;
        }
    }
    out
}

/// `text` with the bytes of `ranges` turned into spaces (newlines kept).
fn blank_ranges(text: &str, ranges: &[Range<usize>]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for range in ranges {
        for byte in &mut bytes[range.clone()] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
    }
    // Whole UTF-8 sequences lie inside or outside each span, so this holds.
    String::from_utf8(bytes).expect("blanking whole characters keeps UTF-8 valid")
}

/// The contents of inline code spans: a run of N backticks up to the next
/// run of exactly N in the same paragraph (CommonMark's rule, without the
/// escapes these pages do not use).
fn inline_code_spans(text: &str) -> Vec<Range<usize>> {
    let mut spans = Vec::new();
    for paragraph in paragraphs(text) {
        let runs = backtick_runs(&text[paragraph.clone()]);
        let mut next = 0;
        while next < runs.len() {
            let open = &runs[next];
            let close = runs[next + 1..].iter().position(|run| run.len() == open.len()).map(|i| next + 1 + i);
            match close {
                Some(close) => {
                    spans.push(paragraph.start + open.end..paragraph.start + runs[close].start);
                    next = close + 1;
                }
                None => next += 1,
            }
        }
    }
    spans
}

/// Byte ranges of the paragraphs of `text`: runs of lines between blank ones.
fn paragraphs(text: &str) -> Vec<Range<usize>> {
    let mut paragraphs = Vec::new();
    let mut start = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        match (line.trim().is_empty(), start) {
            (true, Some(begun)) => {
                paragraphs.push(begun..offset);
                start = None;
            }
            (false, None) => start = Some(offset),
            _ => {}
        }
        offset += line.len();
    }
    if let Some(begun) = start {
        paragraphs.push(begun..offset);
    }
    paragraphs
}

/// Byte ranges of the runs of backticks in `text`.
fn backtick_runs(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut runs = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'`' {
            let start = i;
            while i < bytes.len() && bytes[i] == b'`' {
                i += 1;
            }
            runs.push(start..i);
        } else {
            i += 1;
        }
    }
    runs
}

/// The anchors GitHub gives the page's headings.
fn anchors(page: &Page) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut anchors = BTreeSet::new();
    for heading in headings(page) {
        let slug = slug(heading);
        let count = seen.entry(slug.clone()).or_insert(0);
        anchors.insert(if *count == 0 { slug.clone() } else { format!("{slug}-{count}") });
        *count += 1;
    }
    anchors
}

/// The text of the page's headings. A `#` line inside a code block is a
/// shell comment, not a heading, so the line must be one in the prose too;
/// its text is taken from the page, inline code included.
fn headings(page: &Page) -> impl Iterator<Item = &str> {
    page.text.lines().zip(page.prose.lines()).filter_map(|(text, prose)| heading(prose).and(heading(text)))
}

/// A heading's text, if the line is an ATX heading (`## Text`).
fn heading(line: &str) -> Option<&str> {
    let hashes = line.len() - line.trim_start_matches('#').len();
    let rest = &line[hashes..];
    ((1..=6).contains(&hashes) && rest.starts_with(' ')).then(|| rest.trim().trim_end_matches('#').trim_end())
}

/// GitHub's anchor for a heading: lowercase, spaces to `-`, and every
/// character but letters, digits, `-` and `_` dropped.
fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// Every `[text](target)` in the page's prose, as (byte offset, target).
fn links(page: &Page) -> Vec<(usize, &str)> {
    page.prose
        .match_indices("](")
        .filter_map(|(at, _)| {
            let start = at + 2;
            let length = page.prose[start..].find([')', ' ', '\n'])?;
            Some((at, &page.text[start..start + length]))
        })
        .collect()
}

/// Targets this test cannot and need not check offline.
fn is_external(target: &str) -> bool {
    ["http://", "https://", "mailto:"].iter().any(|scheme| target.starts_with(scheme))
}

/// What is wrong with a relative link from `page`, if anything.
fn broken_link(page: &Page, target: &str, anchors_of: &mut impl FnMut(&Path) -> BTreeSet<String>) -> Option<String> {
    let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
    let path = if file.is_empty() {
        page.path.clone()
    } else {
        page.path.parent().expect("a page lives in a directory").join(file)
    };
    if !path.exists() {
        return Some(format!("link {target}: no such file"));
    }
    if anchor.is_empty() {
        return None;
    }
    if path.extension().is_none_or(|ext| ext != "md") {
        return Some(format!("link {target}: an anchor into a file that is not Markdown"));
    }
    (!anchors_of(&path).contains(anchor)).then(|| format!("link {target}: no heading with that anchor"))
}

/// The repository path a backticked token names, if it names one.
fn repository_path<'a>(token: &'a str, top_level: &BTreeSet<String>) -> Option<&'a str> {
    let token = token.trim();
    if token.is_empty() || token.contains(char::is_whitespace) || token.contains(['*', '{', '<', '$', '…']) {
        return None;
    }
    let token = token.split(['#', ':']).next()?.trim_end_matches(['.', ',', ';', ')', '(']);
    let first = token.split('/').next()?;
    (top_level.contains(first) && (token == first || token.starts_with(&format!("{first}/")))).then_some(token)
}

/// Every broken link and path of one page, in page order, as
/// `page:line: problem`.
fn problems_of(
    page: &Page,
    root: &Path,
    top_level: &BTreeSet<String>,
    anchors_of: &mut impl FnMut(&Path) -> BTreeSet<String>,
) -> Vec<String> {
    let mut problems: Vec<(usize, String)> = Vec::new();
    for (at, target) in links(page) {
        if is_external(target) {
            continue;
        }
        if let Some(problem) = broken_link(page, target, anchors_of) {
            problems.push((at, problem));
        }
    }
    for span in &page.code_spans {
        let Some(path) = repository_path(&page.text[span.clone()], top_level) else { continue };
        if !root.join(path).exists() {
            problems.push((span.start, format!("path `{path}` does not exist")));
        }
    }
    problems.sort();
    problems.into_iter().map(|(at, problem)| format!("{}:{}: {problem}", page.name, page.line_of(at))).collect()
}

#[test]
fn every_link_and_path_in_the_docs_resolves() {
    let root = repository_root();
    let top_level = top_level_directories(&root);
    let pages: Vec<Page> = documentation_pages(&root).into_iter().map(|path| Page::read(&root, path)).collect();

    // Anchors of any Markdown file a link points into, read once each.
    let mut cache: HashMap<PathBuf, BTreeSet<String>> = HashMap::new();
    let mut anchors_of = |path: &Path| {
        let key = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        cache.entry(key).or_insert_with(|| anchors(&Page::read(&root, path.to_path_buf()))).clone()
    };

    let problems: Vec<String> =
        pages.iter().flat_map(|page| problems_of(page, &root, &top_level, &mut anchors_of)).collect();
    for problem in &problems {
        println!("{problem}");
    }
    assert!(problems.is_empty(), "{} broken links or paths in the docs (listed above)", problems.len());
}

#[test]
fn slugs_follow_githubs_rule() {
    assert_eq!(slug("Stores: embedded or ScyllaDB"), "stores-embedded-or-scylladb");
    assert_eq!(slug("What replication and `appendfsync` can lose"), "what-replication-and-appendfsync-can-lose");
    assert_eq!(slug("For analysts: the log, replayed"), "for-analysts-the-log-replayed");
    assert_eq!(slug("snake_case and kebab-case"), "snake_case-and-kebab-case");
}

#[test]
fn backticked_tokens_are_paths_only_under_top_level_directories() {
    let top_level: BTreeSet<String> = ["gate", "lua"].map(String::from).into();
    assert_eq!(repository_path("gate/src/gate.rs:175", &top_level), Some("gate/src/gate.rs"));
    assert_eq!(repository_path("lua/admit.lua.", &top_level), Some("lua/admit.lua"));
    assert_eq!(repository_path("lua/", &top_level), Some("lua/"));
    assert_eq!(repository_path("gate/tests/{a,b}.rs", &top_level), None);
    assert_eq!(repository_path("lua/admit.lua --flag", &top_level), None);
    assert_eq!(repository_path("gateway/x", &top_level), None);
    assert_eq!(repository_path("target/debug/x", &top_level), None);
}

#[test]
fn code_is_not_prose() {
    let text = "a `b](c)` d\n\n```sh\n[x](y)\n```\n[e](f)\n";
    let page = Page::parse("t.md".into(), PathBuf::from("t.md"), text.into());
    let targets: Vec<&str> = links(&page).into_iter().map(|(_, target)| target).collect();
    assert_eq!(targets, ["f"]);
    assert_eq!(page.code_spans.iter().map(|span| &text[span.clone()]).collect::<Vec<_>>(), ["b](c)"]);
}

/// Every alert rule of `prometheus/alerts.yml` points its `runbook_url` at
/// its own section of `docs/RUNBOOK.md`, and that section exists: an
/// operator paged at night follows the link and finds what to do.
#[test]
fn every_alert_links_to_its_own_runbook_section() {
    let root = repository_root();
    let rules = fs::read_to_string(root.join("prometheus/alerts.yml")).expect("prometheus/alerts.yml");
    let runbook = anchors(&Page::read(&root, root.join("docs/RUNBOOK.md")));
    let value = |line: &str, key: &str| line.trim().strip_prefix(key).map(|v| v.trim().trim_matches('"').to_owned());
    let alerts: Vec<String> = rules.lines().filter_map(|line| value(line, "- alert:")).collect();
    let links: Vec<String> = rules.lines().filter_map(|line| value(line, "runbook_url:")).collect();
    assert!(alerts.len() >= 10, "the rules: {alerts:?}");
    assert_eq!(alerts.len(), links.len(), "one runbook_url per alert: {alerts:?} {links:?}");
    let mut problems = Vec::new();
    for (alert, link) in alerts.iter().zip(&links) {
        let expected = format!("docs/RUNBOOK.md#{}", slug(alert));
        if *link != expected {
            problems.push(format!("{alert}: runbook_url {link}, expected {expected}"));
        } else if !runbook.contains(&slug(alert)) {
            problems.push(format!("{alert}: docs/RUNBOOK.md has no section `## {alert}`"));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// The lines of the page's fenced code blocks, with their 1-based numbers.
fn code_lines(text: &str) -> Vec<(usize, &str)> {
    let mut lines = Vec::new();
    let mut in_block = false;
    for (number, line) in (1..).zip(text.lines()) {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
        } else if in_block {
            lines.push((number, line));
        }
    }
    lines
}

/// A `seckill … | jq FILTER` line as (the command, the filter), both with
/// their spaces collapsed and any `# comment` after the filter dropped.
fn jq_example(line: &str) -> Option<(String, String)> {
    let line = line.trim();
    if !line.starts_with("seckill ") {
        return None;
    }
    let (command, filter) = line.split_once(" | jq ")?;
    let filter = filter.split(" #").next().unwrap_or(filter);
    let collapse = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    Some((collapse(command), collapse(filter)))
}

#[test]
fn jq_filters_in_the_docs_are_the_ones_the_help_shows() {
    let root = repository_root();
    let mut helps: HashMap<String, Vec<(String, String)>> = HashMap::new();
    let mut compared = 0;
    let mut problems = Vec::new();
    for path in documentation_pages(&root) {
        let page = Page::read(&root, path);
        for (number, line) in code_lines(&page.text) {
            let Some((command, filter)) = jq_example(line) else { continue };
            let subcommand = command.split_whitespace().nth(1).expect("seckill and a subcommand").to_owned();
            let shown = helps.entry(subcommand.clone()).or_insert_with(|| {
                let output = Command::new(env!("CARGO_BIN_EXE_seckill"))
                    .args([subcommand.as_str(), "--help"])
                    .output()
                    .expect("seckill runs");
                String::from_utf8_lossy(&output.stdout).lines().filter_map(jq_example).collect()
            });
            for (help_command, help_filter) in shown.iter() {
                if *help_command == command {
                    compared += 1;
                    if *help_filter != filter {
                        problems.push(format!(
                            "{}:{number}: `{command} | jq {filter}`, while `seckill {subcommand} --help` pipes it to `jq {help_filter}`",
                            page.name
                        ));
                    }
                }
            }
        }
    }
    for problem in &problems {
        println!("{problem}");
    }
    assert!(problems.is_empty(), "{} jq filters differ from the help's (listed above)", problems.len());
    assert!(compared >= 2, "the docs show the help's jq examples (loadgen, audit): {compared} compared");
}

#[test]
fn jq_examples_are_read_as_a_command_and_a_filter() {
    assert_eq!(
        jq_example("  seckill audit --last 1d  --json | jq '.vouchers[] | .voucher_id'   # failing ones"),
        Some(("seckill audit --last 1d --json".to_owned(), "'.vouchers[] | .voucher_id'".to_owned()))
    );
    assert_eq!(jq_example("curl -s $base | jq ."), None);
    assert_eq!(jq_example("seckill stats --json"), None);
    assert_eq!(code_lines("a\n```sh\nb\n```\nc\n"), [(3, "b")]);
}
