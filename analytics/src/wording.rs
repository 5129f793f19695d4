//! How the audit's rules and the draw's checks word their details, so the
//! two read alike.

/// `1 order`, `2 orders`; `1 entry`, `2 entries`.
pub(crate) fn plural(count: u64, noun: &str) -> String {
    let noun = match (count, noun.strip_suffix('y')) {
        (1, _) => noun.to_owned(),
        (_, Some(stem)) => format!("{stem}ies"),
        _ => format!("{noun}s"),
    };
    format!("{count} {noun}")
}

/// Ends a failed detail with its first example, `… (e.g. seq 3 missing)`.
pub(crate) fn with_example(detail: &mut String, pass: bool, example: Option<String>) {
    if let (false, Some(example)) = (pass, example) {
        detail.push_str(&format!(" (e.g. {example})"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_examples_read_naturally() {
        assert_eq!(
            (plural(1, "entry"), plural(2, "entry"), plural(0, "order")),
            ("1 entry".to_owned(), "2 entries".to_owned(), "0 orders".to_owned())
        );
        let mut detail = "3 entries".to_owned();
        with_example(&mut detail, true, Some("seq 2".to_owned()));
        assert_eq!(detail, "3 entries", "a passing detail needs no example");
        with_example(&mut detail, false, Some("seq 2".to_owned()));
        assert_eq!(detail, "3 entries (e.g. seq 2)");
    }
}
