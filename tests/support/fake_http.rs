//! fakemcp as an HTTP server (`fakemcp --http`), for tests that need an HTTP upstream.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::{paths, tag};

/// A `fakemcp --http 127.0.0.1:0` process, killed on drop.
pub struct FakeHttp {
    child: Child,
    pub url: String,
}

impl FakeHttp {
    /// Starts it with `extra` flags and reads the URL it prints once listening.
    #[track_caller]
    pub fn start(extra: &[&str]) -> FakeHttp {
        let mut child = Command::new(paths::fakemcp())
            .args(["--http", "127.0.0.1:0", "--tag", &tag()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", paths::fakemcp().display()));
        let stdout = child.stdout.take().expect("piped stdout");
        let (sender, url) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = sender.send(line.trim().to_owned());
        });
        let url = url
            .recv_timeout(Duration::from_secs(30))
            .ok()
            .filter(|url| url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"));
        let Some(url) = url else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("fakemcp --http printed no http://127.0.0.1:PORT/mcp line within 30 s");
        };
        FakeHttp { child, url }
    }
}

impl Drop for FakeHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
