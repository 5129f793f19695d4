//! Left-aligned text tables for people, as `seckill topics` and `seckill
//! groups` print them: every column as wide as its widest cell, two spaces
//! between columns, each line indented.

use std::fmt::Write as _;

/// Appends `rows` (the header first) to `out`, each line indented by two
/// spaces, trailing spaces trimmed. Rows shorter than the header leave
/// their last columns empty.
pub fn write_aligned(out: &mut String, rows: &[Vec<String>]) {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|column| rows.iter().filter_map(|row| row.get(column)).map(|cell| cell.chars().count()).max())
        .map(Option::unwrap_or_default)
        .collect();
    for row in rows {
        let line: Vec<String> = row.iter().zip(&widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
        let _ = writeln!(out, "  {}", line.join("  ").trim_end());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_as_wide_as_their_widest_cell() {
        let rows = vec![
            vec!["A".to_owned(), "LONG HEADER".to_owned()],
            vec!["wider".to_owned(), "x".to_owned()],
            vec!["ü".to_owned()],
        ];
        let mut out = String::new();
        write_aligned(&mut out, &rows);
        assert_eq!(out, "  A      LONG HEADER\n  wider  x\n  ü\n");
    }
}
