//! The notation of frame bodies: [short], [int], [string], [long string],
//! [bytes], [string map] and type [option]s, read from a slice and appended
//! to a buffer.
//!
//! Only what the bridge's rewrites and the small setup client need; the
//! bridge forwards every part of a body it does not change byte for byte.

use std::io;

/// A cursor over a body; every read fails cleanly on a truncated body.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    body: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(body: &'a [u8]) -> Self {
        Self { body, pos: 0 }
    }

    /// How many bytes were read so far: the offset of what comes next.
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    pub(crate) fn take(&mut self, len: usize) -> io::Result<&'a [u8]> {
        let end = self.pos.checked_add(len).filter(|end| *end <= self.body.len()).ok_or_else(truncated)?;
        let bytes = &self.body[self.pos..end];
        self.pos = end;
        Ok(bytes)
    }

    pub(crate) fn short(&mut self) -> io::Result<u16> {
        let bytes = self.take(2)?;
        Ok(u16::from_be_bytes([bytes[0], bytes[1]]))
    }

    pub(crate) fn int(&mut self) -> io::Result<i32> {
        let bytes = self.take(4)?;
        Ok(i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    /// A [string]: a short length, then UTF-8.
    pub(crate) fn string(&mut self) -> io::Result<&'a str> {
        let len = self.short()?;
        utf8(self.take(usize::from(len))?)
    }

    /// A [long string]: an int length, then UTF-8.
    pub(crate) fn long_string(&mut self) -> io::Result<&'a str> {
        let len = usize::try_from(self.int()?).map_err(|_| invalid("a negative [long string] length"))?;
        utf8(self.take(len)?)
    }

    /// [bytes]: an int length, then the bytes; a negative length is null.
    pub(crate) fn bytes(&mut self) -> io::Result<Option<&'a [u8]>> {
        match usize::try_from(self.int()?) {
            Ok(len) => self.take(len).map(Some),
            Err(_) => Ok(None),
        }
    }

    /// A [string map]: a short count, then key and value [string]s.
    pub(crate) fn string_map(&mut self) -> io::Result<Vec<(&'a str, &'a str)>> {
        let count = self.short()?;
        (0..count).map(|_| Ok((self.string()?, self.string()?))).collect()
    }

    /// Skips a column type [option], with the types nested in it.
    pub(crate) fn skip_type(&mut self) -> io::Result<()> {
        match self.short()? {
            // custom: the Java class name
            0x0000 => self.string().map(drop),
            // list, set: the element type
            0x0020 | 0x0022 => self.skip_type(),
            // map: key and value types
            0x0021 => {
                self.skip_type()?;
                self.skip_type()
            }
            // user-defined type: keyspace, name, then named fields
            0x0030 => {
                self.string()?;
                self.string()?;
                for _ in 0..self.short()? {
                    self.string()?;
                    self.skip_type()?;
                }
                Ok(())
            }
            // tuple: the element types
            0x0031 => (0..self.short()?).try_for_each(|_| self.skip_type()),
            // every native type is just its id
            _ => Ok(()),
        }
    }
}

/// Appends a [short].
pub(crate) fn put_short(out: &mut Vec<u8>, value: u16) {
    out.extend_from_slice(&value.to_be_bytes());
}

/// Appends an [int].
pub(crate) fn put_int(out: &mut Vec<u8>, value: i32) {
    out.extend_from_slice(&value.to_be_bytes());
}

/// Appends a [string]; fails if it is longer than a short can count.
pub(crate) fn put_string(out: &mut Vec<u8>, value: &str) -> io::Result<()> {
    put_short(out, u16::try_from(value.len()).map_err(|_| invalid("a [string] over 65535 bytes"))?);
    out.extend_from_slice(value.as_bytes());
    Ok(())
}

/// Appends a [long string].
pub(crate) fn put_long_string(out: &mut Vec<u8>, value: &str) -> io::Result<()> {
    put_int(out, i32::try_from(value.len()).map_err(|_| invalid("a [long string] over 2 GB"))?);
    out.extend_from_slice(value.as_bytes());
    Ok(())
}

/// Appends [bytes]; `None` is null.
pub(crate) fn put_bytes(out: &mut Vec<u8>, value: Option<&[u8]>) -> io::Result<()> {
    match value {
        Some(value) => {
            put_int(out, i32::try_from(value.len()).map_err(|_| invalid("[bytes] over 2 GB"))?);
            out.extend_from_slice(value);
        }
        None => put_int(out, -1),
    }
    Ok(())
}

/// Appends a [string map].
pub(crate) fn put_string_map(out: &mut Vec<u8>, entries: &[(&str, &str)]) -> io::Result<()> {
    put_short(out, u16::try_from(entries.len()).map_err(|_| invalid("a [string map] over 65535 entries"))?);
    for (key, value) in entries {
        put_string(out, key)?;
        put_string(out, value)?;
    }
    Ok(())
}

fn utf8(bytes: &[u8]) -> io::Result<&str> {
    std::str::from_utf8(bytes).map_err(|_| invalid("a CQL string that is not UTF-8"))
}

fn truncated() -> io::Error {
    invalid("a truncated CQL frame body")
}

pub(crate) fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_maps_round_trip() {
        let mut out = Vec::new();
        put_string_map(&mut out, &[("CQL_VERSION", "4.0.0"), ("DRIVER_NAME", "x")]).expect("small map");
        put_long_string(&mut out, "SELECT 1").expect("short string");
        put_bytes(&mut out, None).expect("null");
        put_bytes(&mut out, Some(b"ab")).expect("bytes");
        let mut reader = Reader::new(&out);
        assert_eq!(reader.string_map().expect("map"), vec![("CQL_VERSION", "4.0.0"), ("DRIVER_NAME", "x")]);
        assert_eq!(reader.long_string().expect("long string"), "SELECT 1");
        assert_eq!(reader.bytes().expect("null"), None);
        assert_eq!(reader.bytes().expect("bytes"), Some(&b"ab"[..]));
        assert_eq!(reader.position(), out.len());
        assert!(reader.short().is_err());
    }

    #[test]
    fn nested_types_are_skipped_whole() {
        // map<text, frozen<set<tuple<int, custom>>>>, then a marker short
        let mut out = Vec::new();
        for short in [0x0021, 0x000d, 0x0022, 0x0031, 2, 0x0009, 0x0000] {
            put_short(&mut out, short);
        }
        put_string(&mut out, "org.example.Type").expect("short string");
        put_short(&mut out, 0xbeef);
        let mut reader = Reader::new(&out);
        reader.skip_type().expect("a valid type");
        assert_eq!(reader.short().expect("the marker"), 0xbeef);
    }
}
