//! Reading one JSON-RPC message per line from a stream that may misbehave.
//!
//! A peer can write a line that is too long, or not UTF-8. Either is reported as such and
//! reading goes on with the next line: one bad line must not end a connection (a plain
//! line codec stops the stream after its first error). Memory stays bounded: an over-long
//! line is dropped as it arrives, never buffered whole; only its first and last bytes are
//! kept, to tell whose message it was (`mcpx_protocol::dropped`).

use bytes::{Buf, BytesMut};
use mcpx_protocol::dropped::{self, Dropped, EDGE_BYTES};
use tokio_util::codec::Decoder;

/// One line read, or why it could not be read.
#[derive(Debug, PartialEq)]
pub enum Line {
    Text(String),
    /// Longer than the limit; dropped, but for its edges.
    TooLong(Edges),
    /// Not UTF-8; dropped.
    NotUtf8,
}

/// The first and last bytes of a dropped line.
#[derive(Debug, Default, PartialEq)]
pub struct Edges {
    head: Vec<u8>,
    tail: Vec<u8>,
}

impl Edges {
    /// Whose message the line held, when its edges show it.
    pub fn read(&self) -> Option<Dropped> {
        dropped::read_edges(&self.head, &self.tail)
    }

    fn of(line: &[u8]) -> Edges {
        let mut edges = Edges::default();
        edges.extend(line);
        edges
    }

    /// Adds the next bytes of the line: the head takes them until it holds `EDGE_BYTES`,
    /// the tail keeps the last `EDGE_BYTES`.
    fn extend(&mut self, more: &[u8]) {
        let wanted = EDGE_BYTES.saturating_sub(self.head.len()).min(more.len());
        self.head.extend_from_slice(&more[..wanted]);
        let more = &more[more.len().saturating_sub(EDGE_BYTES)..];
        let excess = (self.tail.len() + more.len()).saturating_sub(EDGE_BYTES);
        self.tail.drain(..excess);
        self.tail.extend_from_slice(more);
    }
}

/// A decoder of newline-terminated lines of at most `max` bytes.
pub struct Lines {
    max: usize,
    /// Inside an over-long line, dropping bytes until its end: what was kept of it so far.
    dropping: Option<Edges>,
    /// How far the buffer has been searched for a newline already.
    searched: usize,
}

impl Lines {
    pub fn new(max: usize) -> Lines {
        Lines { max, dropping: None, searched: 0 }
    }

    fn line(&self, bytes: &[u8]) -> Line {
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        if bytes.len() > self.max {
            return Line::TooLong(Edges::of(bytes));
        }
        match std::str::from_utf8(bytes) {
            Ok(text) => Line::Text(text.to_owned()),
            Err(_) => Line::NotUtf8,
        }
    }
}

impl Decoder for Lines {
    type Item = Line;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Line>, std::io::Error> {
        match buf[self.searched..].iter().position(|b| *b == b'\n') {
            Some(offset) => {
                let end = self.searched + offset;
                self.searched = 0;
                let raw = buf.split_to(end + 1);
                if let Some(mut edges) = self.dropping.take() {
                    edges.extend(&raw[..end]);
                    return Ok(Some(Line::TooLong(edges)));
                }
                Ok(Some(self.line(&raw[..end])))
            }
            // A line of `max` bytes may still end in "\r\n": the CR is not part of it.
            None if buf.len() > self.max + 1 => {
                // Too long already: drop it as it comes, and say so at its end.
                match &mut self.dropping {
                    Some(edges) => edges.extend(buf),
                    None => self.dropping = Some(Edges::of(buf)),
                }
                buf.advance(buf.len());
                self.searched = 0;
                Ok(None)
            }
            None => {
                self.searched = buf.len();
                Ok(None)
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Line>, std::io::Error> {
        if let Some(line) = self.decode(buf)? {
            return Ok(Some(line));
        }
        self.searched = 0;
        if let Some(mut edges) = self.dropping.take() {
            edges.extend(buf);
            buf.clear();
            return Ok(Some(Line::TooLong(edges)));
        }
        if buf.is_empty() {
            return Ok(None);
        }
        let raw = buf.split_to(buf.len());
        Ok(Some(self.line(&raw)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use tokio_util::codec::FramedRead;

    async fn read(input: &[u8], max: usize) -> Vec<Line> {
        FramedRead::new(input, Lines::new(max)).map(|l| l.unwrap()).collect().await
    }

    fn too_long(line: &str) -> Line {
        Line::TooLong(Edges::of(line.as_bytes()))
    }

    #[tokio::test]
    async fn bad_lines_are_reported_and_reading_goes_on() {
        let input = b"first\n\xff\xfe\n0123456789abcdef\nok\r\nlast-without-newline";
        assert_eq!(
            read(input, 10).await,
            vec![
                Line::Text("first".into()),
                Line::NotUtf8,
                too_long("0123456789abcdef"),
                Line::Text("ok".into()),
                too_long("last-without-newline"),
            ]
        );
        assert_eq!(read(b"a\nlast", 10).await, vec![Line::Text("a".into()), Line::Text("last".into())]);
    }

    #[tokio::test]
    async fn a_line_of_the_limit_ending_in_crlf_is_read_however_the_reads_are_cut() {
        // Found by fuzz/lines: a read ending between the CR and the LF of a line of exactly
        // `max` bytes made the decoder drop the line as too long.
        for cut in 1..10 {
            let input = b"okJanc\r\nend\n";
            let reader = tokio_util::io::StreamReader::new(futures::stream::iter(
                input
                    .chunks(cut)
                    .map(|c| Ok::<_, std::io::Error>(bytes::Bytes::copy_from_slice(c)))
                    .collect::<Vec<_>>(),
            ));
            let lines: Vec<Line> = FramedRead::new(reader, Lines::new(6)).map(|l| l.unwrap()).collect().await;
            assert_eq!(lines, vec![Line::Text("okJanc".into()), Line::Text("end".into())], "reads of {cut} bytes");
        }
    }

    #[tokio::test]
    async fn an_over_long_line_is_dropped_as_it_arrives() {
        // Fed in small pieces, the decoder never holds more than the limit.
        let mut long = vec![b'x'; 10_000];
        long.extend_from_slice(b"\nafter\n");
        let reader = tokio_util::io::StreamReader::new(futures::stream::iter(
            long.chunks(7).map(|c| Ok::<_, std::io::Error>(bytes::Bytes::copy_from_slice(c))).collect::<Vec<_>>(),
        ));
        let lines: Vec<Line> = FramedRead::new(reader, Lines::new(100)).map(|l| l.unwrap()).collect().await;
        assert_eq!(lines, vec![too_long(&"x".repeat(10_000)), Line::Text("after".into())]);
    }

    #[tokio::test]
    async fn a_dropped_line_keeps_its_edges_to_tell_whose_it_was() {
        // Cut into reads of every size, the kept edges still show the id at either end.
        let text = "y".repeat(5_000);
        let first = format!("{{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{{\"text\":\"{text}\"}}}}\n");
        let last = format!("{{\"result\":{{\"text\":\"{text}\"}},\"jsonrpc\":\"2.0\",\"id\":4}}\r\n");
        for cut in [1, 7, 300, 4096, 20_000] {
            let input = format!("{first}{last}short\n");
            let reader = tokio_util::io::StreamReader::new(futures::stream::iter(
                input
                    .as_bytes()
                    .chunks(cut)
                    .map(|c| Ok::<_, std::io::Error>(bytes::Bytes::copy_from_slice(c)))
                    .collect::<Vec<_>>(),
            ));
            let lines: Vec<Line> = FramedRead::new(reader, Lines::new(1000)).map(|l| l.unwrap()).collect().await;
            let read: Vec<Option<Dropped>> = lines[..2]
                .iter()
                .map(|line| match line {
                    Line::TooLong(edges) => edges.read(),
                    other => panic!("{other:?} is not a dropped line"),
                })
                .collect();
            use mcpx_protocol::RequestId::Number;
            assert_eq!(
                read,
                vec![Some(Dropped::Response(Number(3))), Some(Dropped::Response(Number(4)))],
                "reads of {cut} bytes"
            );
            assert_eq!(lines[2], Line::Text("short".into()));
        }
    }
}
