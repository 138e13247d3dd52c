//! The stdio line decoder, checked against a model: however the bytes are cut into reads,
//! it yields the same lines as splitting the whole input at newlines (a line over the limit
//! is `TooLong`, and its kept edges read as the line's own first and last bytes do; one
//! that is not UTF-8 is `NotUtf8`), and it never holds much more than the limit in its
//! buffer.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use mcpx_protocol::dropped::{Dropped, EDGE_BYTES, read_edges};
use mcpx_upstream::lines::{Line, Lines};
use tokio_util::codec::Decoder;

/// A line read, with what a dropped one's edges show.
#[derive(Debug, PartialEq)]
enum Seen {
    Text(String),
    TooLong(Option<Dropped>),
    NotUtf8,
}

fn seen(line: Line) -> Seen {
    match line {
        Line::Text(text) => Seen::Text(text),
        Line::TooLong(edges) => Seen::TooLong(edges.read()),
        Line::NotUtf8 => Seen::NotUtf8,
    }
}

fn model(input: &[u8], max: usize) -> Vec<Seen> {
    let mut out = Vec::new();
    let mut parts: Vec<&[u8]> = input.split(|b| *b == b'\n').collect();
    let last = parts.pop().unwrap_or_default();
    let mut push = |raw: &[u8]| {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        out.push(if raw.len() > max {
            Seen::TooLong(read_edges(&raw[..EDGE_BYTES.min(raw.len())], &raw[raw.len().saturating_sub(EDGE_BYTES)..]))
        } else {
            match std::str::from_utf8(raw) {
                Ok(t) => Seen::Text(t.to_owned()),
                Err(_) => Seen::NotUtf8,
            }
        });
    };
    parts.into_iter().for_each(&mut push);
    if !last.is_empty() {
        push(last);
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&[max, chunk], input)) = data.split_first_chunk::<2>() else { return };
    let max = usize::from(max % 32) + 1;
    let chunk = usize::from(chunk % 16) + 1;
    let mut decoder = Lines::new(max);
    let mut buf = BytesMut::new();
    let mut got = Vec::new();
    for piece in input.chunks(chunk) {
        buf.extend_from_slice(piece);
        while let Some(line) = decoder.decode(&mut buf).expect("decoding never fails") {
            got.push(seen(line));
        }
        // Bounded: the limit, a trailing CR, and what one read may add.
        assert!(buf.len() <= max + 1 + chunk, "buffer {} for max {max}", buf.len());
    }
    while let Some(line) = decoder.decode_eof(&mut buf).expect("decoding never fails") {
        got.push(seen(line));
    }
    assert_eq!(got, model(input, max));
});
