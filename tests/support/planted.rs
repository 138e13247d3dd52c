//! A socket planted where a client looks for its daemon, by another user or in a folder
//! others may write to: it accepts every connection and reports how many bytes each one
//! sent, so a test can show that a client refused it and sent nothing.
//!
//! The listener is a small Python program (the system's own interpreter, which any uid
//! may run); the test runs as root, which may start it as any uid.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::process::TempDir;

/// The uid a planted socket belongs to: `nobody`, never the test's own.
pub const OTHER_UID: u32 = 65534;

const LISTENER: &str = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(8)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    c.settimeout(2)
    n = 0
    try:
        while True:
            b = c.recv(65536)
            if not b:
                break
            n += len(b)
    except socket.timeout:
        pass
    print("got", n, flush=True)
    c.close()
"#;

pub struct Planted {
    child: Child,
    lines: mpsc::Receiver<String>,
    _bound_in: TempDir,
}

impl Planted {
    /// A listener at `path` run by uid `uid` (bound in a folder that uid may write to,
    /// then moved to `path`, which it could not have created itself).
    #[track_caller]
    pub fn listen(path: &Path, uid: u32) -> Planted {
        let bound_in = TempDir::new();
        std::fs::set_permissions(bound_in.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        let bound = bound_in.path().join("planted.sock");
        let mut command = Command::new("/usr/bin/python3");
        command.args(["-c", LISTENER]).arg(&bound).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit());
        // SAFETY: setgid/setuid are async-signal-safe; run in the child before exec.
        unsafe {
            command.pre_exec(move || {
                if libc::setgid(uid) != 0 || libc::setuid(uid) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = command.spawn().expect("start the planted listener");
        let stdout = child.stdout.take().expect("its stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let ready = lines.recv_timeout(Duration::from_secs(20));
        assert_eq!(ready.as_deref(), Ok("ready"), "the planted listener did not start");
        std::fs::rename(&bound, path)
            .unwrap_or_else(|e| panic!("cannot move the planted socket to {}: {e}", path.display()));
        Planted { child, lines, _bound_in: bound_in }
    }

    /// Stops the listener and returns how many bytes each connection it accepted sent.
    pub fn received(mut self) -> Vec<usize> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Its stdout is closed now: every line it wrote is in the channel.
        self.lines.iter().filter_map(|line| line.strip_prefix("got ").and_then(|n| n.parse().ok())).collect()
    }
}

impl Drop for Planted {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
