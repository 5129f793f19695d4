//! The shell blocks of a Markdown page, and the markers that say how the
//! test treats them. Both markers are HTML comments, visible in the page's
//! source and not in its rendering:
//!
//! * `<!-- not run: REASON -->` on the line before a block's fence: the
//!   block cannot run in a test (it needs Docker, a real Stripe key, a
//!   second machine, ...); it is counted and the reason printed.
//! * `<!-- run with: SHELL -->` anywhere in the page: what the page says a
//!   reader has set before its blocks (`ADMIN`, say), as shell; it runs
//!   before the page's first block.

/// The fences whose blocks are shell a reader pastes.
const SHELL_LANGUAGES: [&str; 3] = ["sh", "bash", "console"];
const NOT_RUN: &str = "<!-- not run:";
const RUN_WITH: &str = "<!-- run with:";
const END: &str = "-->";

/// One fenced shell block.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Block {
    /// The page's name and the fence's 1-based line, for messages.
    pub(crate) page: String,
    pub(crate) line: usize,
    /// The commands, the fence's indentation removed (a `console` block's
    /// `$ ` lines only, without the prompt).
    pub(crate) text: String,
    /// Why it is not run, when marked so.
    pub(crate) not_run: Option<String>,
}

impl Block {
    pub(crate) fn place(&self) -> String {
        format!("{}:{}", self.page, self.line)
    }
}

/// A page's shell blocks and what it says about them.
#[derive(Debug)]
pub(crate) struct Page {
    pub(crate) name: String,
    pub(crate) blocks: Vec<Block>,
    /// The `run with:` shell, if the page has one.
    pub(crate) run_with: Option<String>,
    /// The page's text outside code blocks.
    pub(crate) prose: String,
}

impl Page {
    pub(crate) fn parse(name: &str, text: &str) -> Page {
        let mut blocks = Vec::new();
        let mut prose = String::new();
        let mut run_with = None;
        // The open block: its fence's line, indentation, language and lines.
        let mut open: Option<(usize, usize, String, Vec<String>)> = None;
        let mut last_prose_line = "";
        for (number, line) in (1..).zip(text.lines()) {
            let trimmed = line.trim_start();
            match open.take() {
                None if trimmed.starts_with("```") => {
                    let indent = line.len() - trimmed.len();
                    open = Some((number, indent, trimmed.trim_start_matches('`').trim().to_owned(), Vec::new()));
                }
                None => {
                    prose.push_str(line);
                    prose.push('\n');
                    if let Some(shell) = comment(trimmed, RUN_WITH) {
                        run_with = Some(shell);
                    }
                    if !trimmed.is_empty() {
                        last_prose_line = trimmed;
                    }
                }
                Some((start, _, language, lines)) if trimmed.starts_with("```") => {
                    if SHELL_LANGUAGES.contains(&language.as_str()) {
                        let lines: Vec<&str> = if language == "console" {
                            lines.iter().filter_map(|line| line.strip_prefix("$ ")).collect()
                        } else {
                            lines.iter().map(String::as_str).collect()
                        };
                        blocks.push(Block {
                            page: name.to_owned(),
                            line: start,
                            text: lines.join("\n") + "\n",
                            not_run: comment(last_prose_line, NOT_RUN),
                        });
                    }
                    last_prose_line = "";
                }
                Some((start, indent, language, mut lines)) => {
                    let cut = line.len() - line.trim_start().len();
                    lines.push(line[cut.min(indent)..].to_owned());
                    open = Some((start, indent, language, lines));
                }
            }
        }
        Page { name: name.to_owned(), blocks, run_with, prose }
    }

    /// The blocks the test runs.
    pub(crate) fn runnable(&self) -> impl Iterator<Item = &Block> {
        self.blocks.iter().filter(|block| block.not_run.is_none())
    }
}

/// The text of a one-line `<!-- MARKER text -->` comment.
fn comment(line: &str, marker: &str) -> Option<String> {
    let rest = line.trim().strip_prefix(marker)?.strip_suffix(END)?;
    Some(rest.trim().to_owned())
}

/// Whether `text` runs a bare `seckill` (not `target/release/seckill`): a
/// reader needs the page to say where the binary is.
pub(crate) fn runs_bare_seckill(text: &str) -> bool {
    text.match_indices("seckill ").any(|(at, _)| {
        let before = text[..at].chars().next_back();
        before.is_none_or(|c| matches!(c, ' ' | '\n' | '(' | '|' | ';' | '&'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "\
# A page
<!-- run with: ADMIN=\"$(cat .seckill/admin-token)\" -->

```sh
echo one
```

<!-- not run: needs Docker -->
```bash
docker compose up
```

```text
not shell
```

1. A list:

   ```sh
   echo indented
     echo deeper
   ```

```console
$ echo prompt
output
```
";

    #[test]
    fn shell_blocks_are_read_with_their_markers() {
        let page = Page::parse("p.md", PAGE);
        let blocks: Vec<(usize, &str, Option<&str>)> =
            page.blocks.iter().map(|b| (b.line, b.text.as_str(), b.not_run.as_deref())).collect();
        assert_eq!(
            blocks,
            [
                (4, "echo one\n", None),
                (9, "docker compose up\n", Some("needs Docker")),
                (19, "echo indented\n  echo deeper\n", None),
                (24, "echo prompt\n", None),
            ]
        );
        assert_eq!(page.run_with.as_deref(), Some("ADMIN=\"$(cat .seckill/admin-token)\""));
        assert_eq!(page.runnable().count(), 3);
        assert!(page.prose.contains("A list") && !page.prose.contains("echo one"));
    }

    #[test]
    fn a_bare_seckill_is_told_from_the_built_binary() {
        assert!(runs_bare_seckill("seckill stats\n"));
        assert!(runs_bare_seckill("x=$(seckill token bob)"));
        assert!(runs_bare_seckill("seckill replay | seckill draw verify --from -"));
        assert!(!runs_bare_seckill("target/release/seckill token alice"));
        assert!(!runs_bare_seckill("curl -s $base/api # seckill-wait"));
    }
}
