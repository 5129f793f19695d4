//! The one search query the sandbox understands, in Stripe's search
//! language: `metadata['order_id']:'<value>'` (single or double quotes,
//! `\` escaping a quote or a backslash). Stripe's other fields and clauses
//! are refused rather than misread.

/// The order id a query asks for, or why it is not understood.
pub(crate) fn order_id_of(query: &str) -> Result<String, String> {
    let query = query.trim();
    let rest = ["metadata['order_id']:", "metadata[\"order_id\"]:"]
        .iter()
        .find_map(|prefix| query.strip_prefix(prefix))
        .ok_or_else(|| "only metadata['order_id']:'<value>' is supported".to_owned())?;
    let (value, rest) = quoted(rest.trim_start())?;
    if !rest.trim().is_empty() {
        return Err("only a single clause is supported".to_owned());
    }
    Ok(value)
}

/// Reads one quoted string; returns it unescaped and what follows.
fn quoted(text: &str) -> Result<(String, &str), String> {
    let mut chars = text.char_indices();
    let quote = match chars.next() {
        Some((_, quote @ ('\'' | '"'))) => quote,
        _ => return Err("the value must be quoted".to_owned()),
    };
    let mut value = String::new();
    while let Some((index, c)) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some((_, escaped)) => value.push(escaped),
                None => break,
            },
            c if c == quote => return Ok((value, &text[index + c.len_utf8()..])),
            c => value.push(c),
        }
    }
    Err("the quoted value is not closed".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_order_query_is_read_with_its_escapes() {
        assert_eq!(order_id_of("metadata['order_id']:'o-1'").as_deref(), Ok("o-1"));
        assert_eq!(order_id_of(r#" metadata["order_id"]:"a\"b" "#).as_deref(), Ok("a\"b"));
        assert_eq!(order_id_of(r"metadata['order_id']:'it\'s\\'").as_deref(), Ok(r"it's\"));
    }

    #[test]
    fn other_queries_are_refused() {
        for query in [
            "status:'succeeded'",
            "metadata['voucher_id']:'1'",
            "metadata['order_id']:o-1",
            "metadata['order_id']:'o-1",
            "metadata['order_id']:'o-1' AND status:'succeeded'",
        ] {
            assert!(order_id_of(query).is_err(), "{query}");
        }
    }
}
