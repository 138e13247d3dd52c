//! A cluster on loopback, owned by one test: a real `redis-server`, three `mcpx daemon`s
//! sharing it, and a real `nginx` in front of them configured as `docs/cluster.md` says
//! (the legacy session id hashed consistently, other requests spread). Every process
//! listens on 127.0.0.1 only, on ports of its own; the guard stops them all.
//!
//! `redis-server` and `nginx` are Debian's packages, installed by `scripts/deps.sh`.

use std::collections::HashMap;
use std::fs;
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::client::base_url;
use crate::daemon::Daemon;
use crate::home::Home;
use crate::process::{TempDir, free_port, poll, signal};

/// The secret the test cluster's nodes share.
pub const SECRET: &str = "a test cluster's secret, 32+ characters";

/// How long a process of the cluster may take to listen.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(15);

/// A `redis-server` on a loopback port, with no persistence.
pub struct Redis {
    child: Option<Child>,
    pub port: u16,
    dir: TempDir,
}

impl Redis {
    #[track_caller]
    pub fn start() -> Redis {
        let dir = TempDir::new();
        let mut redis = Redis { child: None, port: free_port(), dir };
        redis.spawn();
        redis
    }

    fn spawn(&mut self) {
        let log = fs::File::create(self.dir.path().join("redis.log")).expect("redis log");
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("redis log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start redis-server (scripts/deps.sh installs it): {e}"));
        self.child = Some(child);
        wait_listening(self.port, "redis-server");
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// What `redis-cli` prints for one command (`args`), trimmed; it must succeed.
    #[track_caller]
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli runs (scripts/deps.sh installs it)");
        assert!(out.status.success(), "redis-cli {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        // Values may be binary (sealed credentials): read as text, lossily.
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Kills Redis (SIGKILL) and waits until its port is closed.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}

/// An `nginx` in front of the nodes, on a loopback port (`-c FILE -p DIR`, no system service).
pub struct Nginx {
    child: Option<Child>,
    pub port: u16,
    dir: TempDir,
}

impl Nginx {
    /// Balances over `nodes` (their `host:port`) as `docs/cluster.md` configures it.
    #[track_caller]
    pub fn start(nodes: &[String]) -> Nginx {
        let dir = TempDir::new();
        let port = free_port();
        let servers: String =
            nodes.iter().map(|n| format!("        server {n} max_fails=1 fail_timeout=2s;\n")).collect();
        let prefix = dir.path().display();
        let conf = format!(
            r#"user root;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
{UPSTREAM}
    upstream mcpx {{
        hash $mcpx_affinity consistent;
{servers}    }}
    server {{
        listen 127.0.0.1:{port};
{LOCATION}
    }}
}}
"#,
            UPSTREAM = NGINX_AFFINITY,
            LOCATION = NGINX_LOCATION,
        );
        let file = dir.path().join("nginx.conf");
        fs::write(&file, conf).expect("write nginx.conf");
        let child = Command::new("nginx")
            .arg("-c")
            .arg(&file)
            .arg("-p")
            .arg(dir.path())
            .args(["-g", "daemon off;"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(dir.path().join("stderr.log")).expect("nginx stderr"))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start nginx (scripts/deps.sh installs it): {e}"));
        let nginx = Nginx { child: Some(child), port, dir };
        let listening = poll(LISTEN_TIMEOUT, || TcpStream::connect(("127.0.0.1", port)).ok());
        assert!(listening.is_some(), "nginx did not listen on {port}: {}", nginx.log());
        nginx
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
            + &fs::read_to_string(self.dir.path().join("stderr.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGTERM: nginx's fast shutdown, which ends its worker too (SIGQUIT would
            // wait for open connections; SIGKILL would leave the worker behind).
            signal(child.id(), libc::SIGTERM);
            let _ = child.wait();
        }
    }
}

/// The affinity key of `docs/cluster.md`: the legacy session id when there is one, else
/// a value unique to the request, so requests outside a session spread over the nodes.
pub const NGINX_AFFINITY: &str = r#"    map $http_mcp_session_id $mcpx_affinity {
        ""      $request_id;
        default $http_mcp_session_id;
    }"#;

/// The `/` location of `docs/cluster.md`: event streams pass as they come.
pub const NGINX_LOCATION: &str = r#"        location / {
            proxy_pass http://mcpx;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 1h;
            proxy_next_upstream error timeout;
        }"#;

/// Redis, three nodes and nginx.
pub struct Cluster {
    pub nodes: Vec<Daemon>,
    pub nginx: Nginx,
    pub redis: Redis,
}

impl Cluster {
    /// Three nodes serving `servers` (a `mcpServers` object), `leaseTtl` `ttl`, plus
    /// `extra` top-level config (tokens, say).
    #[track_caller]
    pub fn start(servers: Value, ttl: &str, extra: Value) -> Cluster {
        Cluster::start_announcing(servers, ttl, extra, [None, None, None])
    }

    /// As [`Cluster::start`], each node telling the others the base URL `announce` gives
    /// it (`cluster.url`) instead of the address it listens on: a relay in front of it.
    #[track_caller]
    pub fn start_announcing(servers: Value, ttl: &str, extra: Value, announce: [Option<String>; 3]) -> Cluster {
        Cluster::start_with(servers, ttl, extra, |_, i| match &announce[i - 1] {
            Some(url) => json!({ "url": url }),
            None => json!({}),
        })
    }

    /// As [`Cluster::start`], node `i` (from 1) with what `node(&redis, i)` gives added to
    /// its `cluster` settings, once Redis runs.
    #[track_caller]
    pub fn start_with(servers: Value, ttl: &str, extra: Value, node: impl Fn(&Redis, usize) -> Value) -> Cluster {
        let redis = Redis::start();
        let nodes: Vec<Daemon> = (1..=3)
            .map(|i| {
                let mut config = json!({
                    "mcpServers": servers,
                    "cluster": {"redis": redis.url(), "secret": SECRET, "nodeId": format!("n{i}"), "leaseTtl": ttl},
                });
                if let (Some(cluster), Value::Object(own)) = (config["cluster"].as_object_mut(), node(&redis, i)) {
                    cluster.extend(own);
                }
                if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
                    config.extend(extra.clone());
                }
                Daemon::start_in(Home::new(&config), &[])
            })
            .collect();
        let upstreams: Vec<String> =
            nodes.iter().map(|n| base_url(n.url()).trim_start_matches("http://").to_owned()).collect();
        let nginx = Nginx::start(&upstreams);
        Cluster { nodes, nginx, redis }
    }

    /// Each node's `/v1/status` (over its socket: the local user sees every instance).
    pub fn statuses(&self) -> Vec<Value> {
        self.nodes.iter().filter(|n| n.is_running()).map(|n| n.home().status()).collect()
    }

    /// Every instance in the union of the nodes' statuses, by `server[key]`: how many
    /// nodes list it.
    pub fn instance_counts(&self) -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        for status in self.statuses() {
            for i in status["instances"].as_array().cloned().unwrap_or_default() {
                *counts
                    .entry(format!("{}[{}]", i["server"].as_str().unwrap(), i["key"].as_str().unwrap()))
                    .or_default() += 1;
            }
        }
        counts
    }

    /// The node (index) whose status lists a lease for `server` whose key contains `key`.
    pub fn owner_of(&self, server: &str, key: &str) -> Option<usize> {
        self.nodes.iter().position(|n| {
            n.is_running()
                && n.home().status()["cluster"]["leases"].as_array().is_some_and(|l| {
                    l.iter().any(|l| l["server"] == server && l["key"].as_str().unwrap().contains(key))
                })
        })
    }
}

fn wait_listening(port: u16, what: &str) {
    let up = poll(LISTEN_TIMEOUT, || TcpStream::connect(("127.0.0.1", port)).ok());
    assert!(up.is_some(), "{what} did not listen on 127.0.0.1:{port} within {LISTEN_TIMEOUT:?}");
}
