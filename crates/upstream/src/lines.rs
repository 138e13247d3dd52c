//! Reading one JSON-RPC message per line from a stream that may misbehave.
//!
//! A peer can write a line that is too long, or not UTF-8. Either is reported as such and
//! reading goes on with the next line: one bad line must not end a connection (a plain
//! line codec stops the stream after its first error). Memory stays bounded: an over-long
//! line is dropped as it arrives, never buffered whole.

use bytes::{Buf, BytesMut};
use tokio_util::codec::Decoder;

/// One line read, or why it could not be read.
#[derive(Debug, PartialEq)]
pub enum Line {
    Text(String),
    /// Longer than the limit; dropped.
    TooLong,
    /// Not UTF-8; dropped.
    NotUtf8,
}

/// A decoder of newline-terminated lines of at most `max` bytes.
pub struct Lines {
    max: usize,
    /// Inside an over-long line, dropping bytes until its end.
    dropping: bool,
    /// How far the buffer has been searched for a newline already.
    searched: usize,
}

impl Lines {
    pub fn new(max: usize) -> Lines {
        Lines { max, dropping: false, searched: 0 }
    }

    fn line(&self, bytes: &[u8]) -> Line {
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        if bytes.len() > self.max {
            return Line::TooLong;
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
                if std::mem::take(&mut self.dropping) {
                    return Ok(Some(Line::TooLong));
                }
                Ok(Some(self.line(&raw[..end])))
            }
            // A line of `max` bytes may still end in "\r\n": the CR is not part of it.
            None if buf.len() > self.max + 1 => {
                // Too long already: drop it as it comes, and say so at its end.
                buf.advance(buf.len());
                self.searched = 0;
                self.dropping = true;
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
        if std::mem::take(&mut self.dropping) {
            buf.clear();
            return Ok(Some(Line::TooLong));
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

    #[tokio::test]
    async fn bad_lines_are_reported_and_reading_goes_on() {
        let input = b"first\n\xff\xfe\n0123456789abcdef\nok\r\nlast-without-newline";
        assert_eq!(
            read(input, 10).await,
            vec![
                Line::Text("first".into()),
                Line::NotUtf8,
                Line::TooLong,
                Line::Text("ok".into()),
                Line::TooLong,
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
                input.chunks(cut).map(|c| Ok::<_, std::io::Error>(bytes::Bytes::copy_from_slice(c))).collect::<Vec<_>>(),
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
        assert_eq!(lines, vec![Line::TooLong, Line::Text("after".into())]);
    }
}
