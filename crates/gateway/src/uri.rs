//! How a resource URI is compared with `resources.allow`/`deny`: one normal form per
//! resource, whatever the caller's spelling.
//!
//! `FILE:///etc/shadow`, `file://localhost/etc/shadow`, `file:///tmp/../etc/shadow` and
//! `file:///%65tc/shadow` all name one file to the server that reads them. So a caller's
//! URI is brought to its normal form (RFC 3986 section 6.2.2, plus what `file:` URIs need)
//! before any pattern sees it, and that normal form is what the upstream receives: what
//! was checked is what is read. A spelling whose meaning depends on how the upstream
//! decodes it (an encoded `/` or `\`, a raw backslash, a control character, a broken
//! escape, escapes that are not UTF-8, a `file:` URI naming another host) is refused with
//! the reason, never guessed at. This module never decides what a policy allows.

use std::fmt::Write as _;

/// A resource URI, normalised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceUri {
    /// What the upstream receives: scheme and host in lower case, unreserved characters
    /// decoded, other escapes in upper case, dot segments removed; for `file:`, an empty
    /// host (`localhost` is none) and no empty path segments.
    pub normal: String,
    /// The normal form with the path's escapes decoded: what patterns are matched with,
    /// so `file:///home/u/My Documents/*` covers `My%20Documents` too.
    decoded: String,
    /// The decoded form with runs of `/` in the path as one, for a scheme that keeps them
    /// (some servers merge them, some do not), when that differs.
    merged: Option<String>,
    /// The decoded forms without what a server may drop from the name it reads: a
    /// fragment always (it is never part of what is fetched, RFC 3986 section 3.5), for
    /// `file:` the query too (a file server reads the path alone), and userinfo (which
    /// names no other resource). So a pattern naming `file:///etc/shadow` holds against
    /// `file:///etc/shadow?x` and `…#x`, and one naming `https://h/admin` against
    /// `https://user@h/admin`.
    bare: Vec<String>,
}

impl ResourceUri {
    /// Every reading of the URI a policy must admit: a server may take any.
    pub fn readings(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.decoded.as_str()).chain(self.merged.as_deref()).chain(self.bare.iter().map(String::as_str))
    }
}

/// Which part of a URI an escape is in: an encoded `/` or `\` changes what a path or host
/// names, while in a query or fragment it is data.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Authority,
    Path,
    Query,
}

/// The normal form of `uri`, or why it has none that mcpx can be sure of.
pub fn normalize(uri: &str) -> Result<ResourceUri, String> {
    if let Some(c) = uri.chars().find(|c| c.is_control()) {
        return Err(format!("it holds the control character {c:?}"));
    }
    if uri.contains('\\') {
        return Err("it holds a backslash, which some servers read as '/'".into());
    }
    let (scheme, rest) = split_scheme(uri)
        .ok_or("it has no scheme: a resource URI is absolute (RFC 3986 section 4.3), like file:///path")?;
    let scheme = scheme.to_ascii_lowercase();
    let file = scheme == "file";
    let (rest, fragment) = match rest.split_once('#') {
        Some((rest, fragment)) => (rest, Some(fragment)),
        None => (rest, None),
    };
    let (hier, query) = match rest.split_once('?') {
        Some((hier, query)) => (hier, Some(query)),
        None => (rest, None),
    };
    let (authority, path) = match hier.strip_prefix("//") {
        Some(after) => {
            let end = after.find('/').unwrap_or(after.len());
            (Some(authority(&after[..end], &scheme)?), &after[end..])
        }
        None => (None, hier),
    };
    let authority = match (file, authority) {
        (true, None) => Some(String::new()),
        (true, Some(host)) if host.is_empty() || host == "localhost" => Some(String::new()),
        (true, Some(host)) => {
            return Err(format!(
                "a file: URI names host {host:?}; servers differ on whether that reads a local file, so only an empty host or localhost is taken"
            ));
        }
        (false, authority) => authority,
    };
    if file && !path.starts_with('/') {
        return Err("a file: URI's path must be absolute (begin with '/')".into());
    }
    let (path, decoded_path) = escapes(path, Part::Path)?;
    let decoded_path = String::from_utf8(decoded_path)
        .map_err(|_| "its path's escapes decode to bytes that are not UTF-8".to_owned())?;
    // A file server reads `/a//..` as `/`, so runs of `/` go before the dot segments.
    let tidy = |path: &str| match file {
        true => remove_dot_segments(&merge_slashes(path)),
        false => remove_dot_segments(path),
    };
    let (path, decoded_path) = (tidy(&path), tidy(&decoded_path));
    let mut head = format!("{scheme}:");
    if let Some(authority) = &authority {
        let _ = write!(head, "//{authority}");
    }
    // Userinfo names no other resource (RFC 3986 section 7.5): the reading without it too.
    let anonymous =
        authority.as_deref().and_then(|a| a.rsplit_once('@')).map(|(_, hostport)| format!("{scheme}://{hostport}"));
    let mut tail = String::new();
    if let Some(query) = query {
        let _ = write!(tail, "?{}", escapes(query, Part::Query)?.0);
    }
    // What is left once a server drops the fragment (and, reading a file, the query).
    let kept = if file { String::new() } else { tail.clone() };
    if let Some(fragment) = fragment {
        let _ = write!(tail, "#{}", escapes(fragment, Part::Query)?.0);
    }
    let merged_path = merge_slashes(&decoded_path);
    let merged = (merged_path != decoded_path).then(|| format!("{head}{merged_path}{tail}"));
    let decoded = format!("{head}{decoded_path}{tail}");
    // Every other combination of: with or without userinfo, slashes merged or not, with
    // the whole tail or only what a server keeps of it.
    let mut bare = Vec::new();
    for at in std::iter::once(&head).chain(anonymous.as_ref()) {
        for path in std::iter::once(&decoded_path).chain((merged_path != decoded_path).then_some(&merged_path)) {
            for end in [&tail, &kept] {
                let reading = format!("{at}{path}{end}");
                if reading != decoded && merged.as_ref() != Some(&reading) && !bare.contains(&reading) {
                    bare.push(reading);
                }
            }
        }
    }
    Ok(ResourceUri { normal: format!("{head}{path}{tail}"), decoded, merged, bare })
}

/// The scheme (RFC 3986 section 3.1: a letter, then letters, digits, `+`, `-`, `.`) and
/// what follows its `:`.
fn split_scheme(uri: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = uri.split_once(':')?;
    let mut chars = scheme.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some((scheme, rest))
}

/// An authority in normal form: the host in lower case without a trailing dot, an IP
/// address written one way, no empty or default port and no leading zeros in one,
/// escapes as in a path.
fn authority(raw: &str, scheme: &str) -> Result<String, String> {
    let (normal, _) = escapes(raw, Part::Authority)?;
    let (userinfo, hostport) = match normal.rsplit_once('@') {
        Some((userinfo, hostport)) => (Some(userinfo), hostport),
        None => (None, normal.as_str()),
    };
    // A port follows the last ':' outside an IPv6 literal's brackets.
    let (host, port) = match hostport.rfind(':').filter(|&i| !hostport[i..].contains(']')) {
        Some(i) => (&hostport[..i], &hostport[i + 1..]),
        None => (hostport, ""),
    };
    let host = host.to_ascii_lowercase();
    let host = host.strip_suffix('.').filter(|h| !h.is_empty()).unwrap_or(&host);
    // Only where the host is one a URL parser connects to; another scheme's host is a
    // name its server gives meaning to (`github://123/issues`), kept as written.
    let (default, web) = match scheme {
        "http" | "ws" => ("80", true),
        "https" | "wss" => ("443", true),
        "ftp" => ("21", true),
        _ => ("", false),
    };
    let host = match web {
        true => ip_host(host)?.unwrap_or_else(|| host.to_owned()),
        false => host.to_owned(),
    };
    if !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("its port {port:?} is not a number"));
    }
    let port = match port.trim_start_matches('0') {
        "" if !port.is_empty() => "0",
        trimmed => trimmed,
    };
    let mut out = userinfo.map(|u| format!("{u}@")).unwrap_or_default();
    out.push_str(&host);
    if !port.is_empty() && port != default {
        let _ = write!(out, ":{port}");
    }
    Ok(out)
}

/// A host that is an IP address, written as URL parsers write it (WHATWG URL): an IPv6
/// literal in RFC 5952 form, and a host whose last label is a number (`127.1`,
/// `2130706433`, `0x7f.0.0.1`, `0177.0.0.1`) as a dotted quad, since that is the address
/// a fetching server connects to. `None` for a name; an error for a host a parser would
/// take for an address but that is none.
fn ip_host(host: &str) -> Result<Option<String>, String> {
    if let Some(inner) = host.strip_prefix('[') {
        let literal = inner.strip_suffix(']').ok_or("its host has a '[' without a closing ']'")?;
        let address: std::net::Ipv6Addr =
            literal.parse().map_err(|_| format!("its host [{literal}] is not an IPv6 address"))?;
        return Ok(Some(format!("[{address}]")));
    }
    let number = |label: &str| match label.strip_prefix("0x") {
        Some(hex) => hex.bytes().all(|b| b.is_ascii_hexdigit()),
        None => !label.is_empty() && label.bytes().all(|b| b.is_ascii_digit()),
    };
    if !host.rsplit('.').next().is_some_and(number) {
        return Ok(None);
    }
    let refused = || format!("its host {host:?} reads as an IPv4 address but is not one");
    let labels: Vec<&str> = host.split('.').collect();
    if labels.len() > 4 {
        return Err(refused());
    }
    let parse = |label: &str| -> Option<u64> {
        let (digits, radix) = match label.strip_prefix("0x") {
            Some(hex) => (hex, 16),
            None if label.len() > 1 && label.starts_with('0') => (&label[1..], 8),
            None => (label, 10),
        };
        if digits.is_empty() {
            return (radix == 16).then_some(0);
        }
        u64::from_str_radix(digits, radix).ok().filter(|n| *n <= u64::from(u32::MAX))
    };
    let numbers = labels.iter().map(|l| parse(l)).collect::<Option<Vec<u64>>>().ok_or_else(refused)?;
    let (last, leading) = numbers.split_last().ok_or_else(refused)?;
    if leading.iter().any(|n| *n > 255) || *last >= 256u64.pow(5 - numbers.len() as u32) {
        return Err(refused());
    }
    let address = leading.iter().enumerate().fold(*last, |sum, (i, n)| sum + (n << (8 * (3 - i))));
    Ok(Some(std::net::Ipv4Addr::from(address as u32).to_string()))
}

/// `text` with its escapes in normal form (unreserved characters decoded, the rest in
/// upper case), and its bytes with every escape decoded.
fn escapes(text: &str, part: Part) -> Result<(String, Vec<u8>), String> {
    let bytes = text.as_bytes();
    let mut normal = String::with_capacity(text.len());
    let mut decoded = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            let next = text[i..].chars().next().map_or(1, char::len_utf8);
            normal.push_str(&text[i..i + next]);
            decoded.extend_from_slice(&bytes[i..i + next]);
            i += next;
            continue;
        }
        let digit = |at: usize| bytes.get(at).and_then(|b| char::from(*b).to_digit(16));
        let (Some(high), Some(low)) = (digit(i + 1), digit(i + 2)) else {
            return Err("it has a '%' that is not followed by two hex digits".into());
        };
        let byte = (high * 16 + low) as u8;
        if byte.is_ascii_control() {
            return Err(format!("it holds an encoded control character (%{byte:02X})"));
        }
        if part != Part::Query && matches!(byte, b'/' | b'\\') {
            return Err(format!(
                "it holds an encoded {:?} (%{byte:02X}) in its {}: servers differ on whether it separates names",
                byte as char,
                if part == Part::Path { "path" } else { "host" }
            ));
        }
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            normal.push(byte as char);
        } else {
            let _ = write!(normal, "%{byte:02X}");
        }
        decoded.push(byte);
        i += 3;
    }
    Ok((normal, decoded))
}

/// RFC 3986 section 5.2.4: the path without `.` and `..` segments.
fn remove_dot_segments(path: &str) -> String {
    let mut input = path;
    let mut out = String::with_capacity(path.len());
    let pop = |out: &mut String| out.truncate(out.rfind('/').unwrap_or(0));
    while !input.is_empty() {
        if let Some(rest) = input.strip_prefix("../").or_else(|| input.strip_prefix("./")) {
            input = rest;
        } else if input.starts_with("/./") {
            input = &input[2..];
        } else if input == "/." {
            input = "/";
        } else if input.starts_with("/../") {
            input = &input[3..];
            pop(&mut out);
        } else if input == "/.." {
            input = "/";
            pop(&mut out);
        } else if input == "." || input == ".." {
            input = "";
        } else {
            let start = usize::from(input.starts_with('/'));
            let end = input[start..].find('/').map_or(input.len(), |i| i + start);
            out.push_str(&input[..end]);
            input = &input[end..];
        }
    }
    out
}

/// The path with every run of `/` as one.
fn merge_slashes(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if !(c == '/' && out.ends_with('/')) {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normal(uri: &str) -> String {
        normalize(uri).unwrap_or_else(|e| panic!("{uri}: {e}")).normal
    }

    #[test]
    fn every_spelling_of_one_file_has_one_normal_form() {
        for uri in [
            "file:///etc/shadow",
            "FILE:///etc/shadow",
            "File:///etc/shadow",
            "file://localhost/etc/shadow",
            "file://LOCALHOST/etc/shadow",
            "file://localhost./etc/shadow",
            "file://%6Cocalhost/etc/shadow",
            "file:/etc/shadow",
            "file:////etc/shadow",
            "file:///etc//shadow",
            "file:///tmp/../etc/shadow",
            "file:///./etc/shadow",
            "file:///../../etc/shadow",
            "file:///etc/./shadow",
            "file:///etc/x/../shadow",
            "file:///etc/x//../shadow",
            "file:///%65tc/shadow",
            "file:///%65%74%63/%73hadow",
            "file:///%2e%2e/etc/shadow",
            "file:///etc/%2E/shadow",
        ] {
            assert_eq!(normal(uri), "file:///etc/shadow", "{uri}");
        }
    }

    #[test]
    fn scheme_and_host_case_and_escapes_follow_rfc_3986() {
        assert_eq!(
            normal("HTTPS://Example.COM./A/%7euser/%c3%a9?Q=%2f#F"),
            "https://example.com/A/~user/%C3%A9?Q=%2F#F"
        );
        assert_eq!(normal("https://User@Host:/x"), "https://User@host/x");
        assert_eq!(normal("https://[::1]:8080/x"), "https://[::1]:8080/x");
        assert_eq!(normal("https://[0:0::0001]:443/x"), "https://[::1]/x");
        assert_eq!(normal("http://H:080/x"), "http://h/x");
        assert_eq!(normal("https://h:08443/x"), "https://h:8443/x");
        for ip in ["127.0.0.1", "127.1", "2130706433", "0x7f.0.0.1", "0177.0.0.1", "0x7F000001", "127.0.1"] {
            assert_eq!(normal(&format!("http://{ip}/x")), "http://127.0.0.1/x", "{ip}");
        }
        assert_eq!(normal("http://a.b1/x"), "http://a.b1/x", "a name ending in a digit is a name");
        assert_eq!(normal("github://123/issues"), "github://123/issues", "another scheme's host is its own");
        assert_eq!(normal("http://h:00/x"), "http://h:0/x");
        for (uri, why) in [
            ("http://1.2.3.4.5/x", "IPv4"),
            ("http://0x1g.0.0.1/x", "IPv4"),
            ("http://256.0.0.1/x", "IPv4"),
            ("https://h:4x/", "port"),
            ("https://[::g]/", "IPv6"),
        ] {
            let e = normalize(uri).expect_err(uri);
            assert!(e.contains(why), "{uri}: {e}");
        }
        assert_eq!(normal("test://template/123/data"), "test://template/123/data");
        assert_eq!(normal("urn:example:a/./b/../c"), "urn:example:a/c");
    }

    #[test]
    fn the_normal_form_is_its_own_normal_form() {
        for uri in ["FILE://localhost/a/../b%2e/%7e?x=%2f", "HTTPS://H.//a//b/./c#%41", "file:/x/y/.."] {
            let once = normal(uri);
            assert_eq!(normal(&once), once, "{uri}");
        }
    }

    #[test]
    fn patterns_see_the_decoded_path_and_merged_slashes() {
        let u = normalize("file:///home/u/My%20Documents/caf%C3%A9").unwrap();
        assert_eq!(u.normal, "file:///home/u/My%20Documents/caf%C3%A9");
        assert_eq!(u.readings().collect::<Vec<_>>(), ["file:///home/u/My Documents/café"]);
        let u = normalize("https://h/a//admin/x").unwrap();
        assert_eq!(u.normal, "https://h/a//admin/x", "kept: the server decides");
        assert_eq!(u.readings().collect::<Vec<_>>(), ["https://h/a//admin/x", "https://h/a/admin/x"]);
    }

    #[test]
    fn patterns_see_the_name_without_what_a_server_drops() {
        let u = normalize("file:///etc/shadow?raw=1#top").unwrap();
        assert_eq!(u.normal, "file:///etc/shadow?raw=1#top", "what the upstream receives is unchanged");
        assert_eq!(u.readings().collect::<Vec<_>>(), ["file:///etc/shadow?raw=1#top", "file:///etc/shadow"]);
        let u = normalize("https://h/a//admin?x=1#top").unwrap();
        assert_eq!(
            u.readings().collect::<Vec<_>>(),
            [
                "https://h/a//admin?x=1#top",
                "https://h/a/admin?x=1#top",
                "https://h/a//admin?x=1",
                "https://h/a/admin?x=1"
            ]
        );
        assert_eq!(normalize("https://h/a?x=1").unwrap().readings().count(), 1, "a query is part of a URL's name");
    }

    #[test]
    fn a_spelling_the_upstream_may_read_two_ways_is_refused_with_why() {
        for (uri, why) in [
            ("file:///etc%2Fshadow", "(%2F) in its path"),
            ("file:///etc%2fshadow", "(%2F) in its path"),
            ("file:///etc%5Cshadow", "(%5C) in its path"),
            ("file:///etc\\shadow", "backslash"),
            ("file:///etc/shadow%00.txt", "control"),
            ("file:///etc/shadow\u{0}", "control"),
            ("file:///etc/sha\ndow", "control"),
            ("file:///etc/%zzshadow", "two hex digits"),
            ("file:///etc/shadow%4", "'%'"),
            ("file:///etc/%+1shadow", "'%'"),
            ("file:///etc/%FFshadow", "not UTF-8"),
            ("file://evil.example/etc/shadow", "names host \"evil.example\""),
            ("file:etc/shadow", "absolute"),
            ("/etc/shadow", "no scheme"),
            ("etc/shadow", "no scheme"),
            ("1x:/etc/shadow", "no scheme"),
            ("https://a%2Fb/x", "in its host"),
        ] {
            let e = normalize(uri).expect_err(uri);
            assert!(e.contains(why), "{uri}: {e}");
        }
        assert!(normalize("https://h/x?next=%2Fetc%2F").is_ok(), "an encoded '/' in a query is data");
    }

    #[test]
    fn a_long_path_of_dot_segments_is_quick() {
        let uri = format!("file:///{}etc", "a/../".repeat(200_000));
        assert_eq!(normal(&uri), "file:///etc");
    }
}
