//! Where a request mcpx sends may go: never to mcpx itself, and to an address of the
//! machine or its private network only where the user pointed mcpx.
//!
//! Every URL a client fetches is either one the user configured (an upstream's `url`, an
//! issuer, a traces collector) or one a remote party named: metadata endpoints, a
//! `WWW-Authenticate` hint, a redirect. A remote party must not aim mcpx at what only mcpx
//! can reach: its own API (a POST to `/v1/stop` stops the daemon), the loopback services of
//! the user, the private network, a cloud's metadata address. So each client carries an
//! [`Egress`]: the places the user chose (its anchors), and the hosts and networks the user
//! allowed on top. The check runs where the connection is made, on the addresses the name
//! resolved to right then (a name that resolves to a forbidden address, or changes what it
//! resolves to between two lookups, gains nothing), and again on the connected socket's
//! peer.
//!
//! The addresses mcpx listens on are a fact of the process, not of one client: whichever
//! code built a client, none may reach them. They are kept here ([`listening`]) for that
//! reason; nothing else in this module is shared.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};

use hyper::Uri;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// The setting that allows more destinations, named in refusals.
const ALLOW_SETTING: &str = "egress.allow";

/// What an address is, for who may send to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Anywhere on the internet.
    Public,
    /// This machine: `127.0.0.0/8`, `::1`, and the unspecified address, which reaches it.
    Loopback,
    /// `169.254.0.0/16` (where clouds serve instance metadata), `fe80::/10`.
    LinkLocal,
    /// RFC 1918, shared address space (`100.64.0.0/10`), unique local `fc00::/7`.
    Private,
    /// Multicast, broadcast and reserved ranges: never a server's.
    Reserved,
}

impl Reach {
    pub fn of(ip: IpAddr) -> Reach {
        // An IPv4 address written as IPv6 (`::ffff:a.b.c.d`) is that IPv4 address.
        match ip.to_canonical() {
            IpAddr::V4(v4) => reach_v4(v4),
            IpAddr::V6(v6) => reach_v6(v6),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Reach::Public => "a public address",
            Reach::Loopback => "a loopback address",
            Reach::LinkLocal => "a link-local address",
            Reach::Private => "a private address",
            Reach::Reserved => "a reserved address",
        }
    }
}

fn reach_v4(ip: Ipv4Addr) -> Reach {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() || a == 0 {
        Reach::Loopback
    } else if ip.is_link_local() {
        Reach::LinkLocal
    } else if ip.is_private() || (a == 100 && (64..128).contains(&b)) || (a == 198 && (b == 18 || b == 19)) {
        Reach::Private
    } else if ip.is_multicast() || ip.is_broadcast() || a >= 240 {
        Reach::Reserved
    } else {
        Reach::Public
    }
}

fn reach_v6(ip: Ipv6Addr) -> Reach {
    let segments = ip.segments();
    if ip.is_loopback() || ip.is_unspecified() {
        Reach::Loopback
    } else if ip.is_unicast_link_local() {
        Reach::LinkLocal
    } else if ip.is_unique_local() {
        Reach::Private
    } else if ip.is_multicast() || segments[..6] == [0; 6] {
        // The deprecated IPv4-compatible form is no server's address.
        Reach::Reserved
    } else if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        // NAT64 reaches the IPv4 address it embeds.
        reach_v4(Ipv4Addr::from(((segments[6] as u32) << 16) | segments[7] as u32))
    } else if segments[0] == 0x2002 {
        // 6to4 likewise.
        reach_v4(Ipv4Addr::from(((segments[1] as u32) << 16) | segments[2] as u32))
    } else {
        Reach::Public
    }
}

/// A destination the user allowed beyond the anchors: a host name, an address, or a
/// network in CIDR notation.
#[derive(Clone, Debug, PartialEq)]
pub enum Allowed {
    Host(String),
    Net(ipnet::IpNet),
}

impl Allowed {
    /// `"example.internal"`, `"10.0.0.7"`, `"10.0.0.0/8"` or `"fd00::/8"`.
    pub fn parse(text: &str) -> Result<Allowed, String> {
        let text = text.trim();
        if let Ok(net) = text.parse::<ipnet::IpNet>() {
            return Ok(Allowed::Net(net.trunc()));
        }
        if let Ok(ip) = text.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
            return Ok(Allowed::Net(ipnet::IpNet::from(ip)));
        }
        let valid = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '.';
        if text.is_empty() || text.contains('/') || !text.chars().all(valid) {
            return Err(format!("{text:?} is neither a host name, an IP address nor a CIDR network"));
        }
        Ok(Allowed::Host(text.trim_end_matches('.').to_ascii_lowercase()))
    }

    fn admits(&self, host: &str, ip: IpAddr) -> bool {
        match self {
            Allowed::Host(name) => name.eq_ignore_ascii_case(host.trim_end_matches('.')),
            Allowed::Net(net) => net.contains(&ip.to_canonical()) || net.contains(&ip),
        }
    }
}

/// A host and port the user pointed a client at.
#[derive(Clone, Debug, PartialEq)]
struct Anchor {
    host: String,
    port: u16,
    /// Where it is, when its URL says: an IP address, or `localhost`. A name's addresses
    /// are whatever its DNS says, and a remote party may own that DNS: a name claims no
    /// place, so that the owner of `evil.example` cannot unlock loopback by resolving it
    /// to 127.0.0.1.
    reach: Option<Reach>,
}

/// Where one client's requests may go (see the module's comment).
#[derive(Clone, Debug, Default)]
pub struct Egress {
    /// Where the user pointed the client: reached wherever they are (but mcpx itself); and
    /// where their URLs say what kind of place they are in (an IP address, `localhost`),
    /// learned destinations may be in that kind of place too.
    anchors: Vec<Anchor>,
    /// Hosts and networks the user allowed on top.
    allow: Arc<[Allowed]>,
    /// Any destination but mcpx itself: for peers that hold a secret the user configured.
    trusting: bool,
}

impl Egress {
    /// Toward `url`, a place the user chose: it and public addresses, and beside it
    /// addresses of its kind.
    pub fn toward(url: &url::Url) -> Egress {
        Egress::default().and_toward(url)
    }

    /// Another place the user chose.
    pub fn and_toward(mut self, url: &url::Url) -> Egress {
        if let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) {
            let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
            let reach = match host.parse::<IpAddr>() {
                Ok(ip) => Some(Reach::of(ip)),
                Err(_) if host == "localhost" || host.ends_with(".localhost") => Some(Reach::Loopback),
                Err(_) => None,
            };
            self.anchors.push(Anchor { host, port, reach });
        }
        self
    }

    /// With the destinations the user allowed.
    pub fn allowing(mut self, allow: Arc<[Allowed]>) -> Egress {
        self.allow = allow;
        self
    }

    /// Anywhere but mcpx itself: for other nodes of a cluster, reached with its secret.
    pub fn trusting() -> Egress {
        Egress { trusting: true, ..Egress::default() }
    }

    fn is_anchor(&self, host: &str, port: u16) -> bool {
        self.anchors.iter().any(|a| a.port == port && a.host.eq_ignore_ascii_case(host))
    }

    /// Whether `host:port`, resolved to `addr`, may be sent to; `Err` says why not.
    /// `own` is where mcpx listens.
    pub fn judge(&self, host: &str, addr: SocketAddr, own: &[SocketAddr]) -> Result<(), String> {
        if let Some(listen) = own_address(addr, own) {
            return Err(format!("{host} resolves to {addr}, where mcpx itself listens ({listen})"));
        }
        let reach = Reach::of(addr.ip());
        let admitted = self.trusting
            || reach == Reach::Public
            || self.is_anchor(host, addr.port())
            || self.anchors.iter().any(|a| a.reach == Some(reach))
            || self.allow.iter().any(|a| a.admits(host, addr.ip()));
        if admitted {
            return Ok(());
        }
        let anchors = match self.anchors.as_slice() {
            [] => "it was not configured".to_owned(),
            [one] if one.reach.is_none() => {
                format!("{}:{} vouches for no such place (a host name, not an address)", one.host, one.port)
            }
            [one] => format!("{}:{} is not there", one.host, one.port),
            many => {
                let named: Vec<String> = many.iter().map(|a| format!("{}:{}", a.host, a.port)).collect();
                format!("none of {} is there", named.join(", "))
            }
        };
        Err(format!(
            "{host} resolves to {}, {}, and {anchors} (the hosts and networks in {ALLOW_SETTING} may be reached)",
            addr.ip(),
            reach.name()
        ))
    }
}

/// The listening address of mcpx that `addr` reaches, if it reaches one: the same address
/// and port, or any address of this machine on the port of a wildcard listener.
pub fn own_address(addr: SocketAddr, own: &[SocketAddr]) -> Option<SocketAddr> {
    let ip = addr.ip().to_canonical();
    own.iter().copied().find(|listen| {
        let at = listen.ip().to_canonical();
        listen.port() == addr.port()
            && (at == ip
                // Connecting to the unspecified address reaches this machine's loopback.
                || (ip.is_unspecified() && (at.is_loopback() || at.is_unspecified()))
                || (at.is_unspecified() && Reach::of(ip) == Reach::Loopback))
    })
}

/// Where this process listens for requests.
static LISTENING: RwLock<Vec<SocketAddr>> = RwLock::new(Vec::new());

/// Records that mcpx listens on `addr` until the returned guard is dropped: no client of
/// this process sends a request there.
pub fn listening(addr: SocketAddr) -> Listening {
    LISTENING.write().unwrap_or_else(|e| e.into_inner()).push(addr);
    Listening(addr)
}

/// mcpx listens on an address while this lives.
#[must_use = "the address stops being mcpx's own when this is dropped"]
pub struct Listening(SocketAddr);

impl Drop for Listening {
    fn drop(&mut self) {
        let mut own = LISTENING.write().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = own.iter().position(|a| *a == self.0) {
            own.remove(at);
        }
    }
}

fn own() -> Vec<SocketAddr> {
    LISTENING.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// `host`'s addresses now: itself when it is an IP address.
async fn resolve(host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    Ok(tokio::net::lookup_host((host, port)).await?.collect())
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The TCP connector of a client: resolves the destination, keeps the addresses its
/// [`Egress`] allows, connects to the first that answers, and checks the socket's peer.
#[derive(Clone)]
pub(crate) struct Guarded {
    pub(crate) tcp: HttpConnector,
    pub(crate) egress: Arc<Egress>,
}

impl tower_service::Service<Uri> for Guarded {
    type Response = TokioIo<TcpStream>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let mut tcp = self.tcp.clone();
        let egress = self.egress.clone();
        Box::pin(async move {
            let host = dst.host().ok_or("a URL without a host")?.trim_start_matches('[').trim_end_matches(']');
            let port = dst.port_u16().unwrap_or(if dst.scheme_str() == Some("https") { 443 } else { 80 });
            let addrs = resolve(host, port).await.map_err(|e| format!("resolving {host}: {e}"))?;
            let own = own();
            let mut refused = None;
            let mut failed = None;
            for addr in addrs {
                if let Err(why) = egress.judge(host, addr, &own) {
                    refused.get_or_insert(why);
                    continue;
                }
                let to: Uri = format!("http://{addr}").parse().map_err(|e| format!("{addr}: {e}"))?;
                match tcp.call(to).await {
                    Ok(stream) => {
                        check_peer(stream.inner(), &own)?;
                        return Ok(stream);
                    }
                    Err(e) => failed = Some(BoxError::from(e)),
                }
            }
            match (refused, failed) {
                (_, Some(error)) => Err(error),
                (Some(why), None) => Err(format!("refused to connect: {why}").into()),
                (None, None) => Err(format!("{host} resolves to no address").into()),
            }
        })
    }
}

/// A connected socket whose peer is this machine on a port mcpx listens on everywhere
/// (`0.0.0.0`, `::`) reached mcpx itself, by one of the machine's own addresses.
fn check_peer(stream: &TcpStream, own: &[SocketAddr]) -> Result<(), String> {
    let (Ok(peer), Ok(local)) = (stream.peer_addr(), stream.local_addr()) else { return Ok(()) };
    let local_machine = peer.ip().to_canonical() == local.ip().to_canonical();
    let wildcard = own.iter().any(|l| l.port() == peer.port() && l.ip().is_unspecified());
    if let Some(listen) = own_address(peer, own).or(Some(peer).filter(|_| local_machine && wildcard)) {
        return Err(format!("refused to connect: {peer} is where mcpx itself listens ({listen})"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn at(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn addresses_are_sorted_by_who_can_reach_them() {
        for (text, reach) in [
            ("127.0.0.1", Reach::Loopback),
            ("127.3.2.1", Reach::Loopback),
            ("0.0.0.0", Reach::Loopback),
            ("::1", Reach::Loopback),
            ("::", Reach::Loopback),
            ("::ffff:127.0.0.1", Reach::Loopback),
            ("169.254.169.254", Reach::LinkLocal),
            ("fe80::1", Reach::LinkLocal),
            ("::ffff:169.254.169.254", Reach::LinkLocal),
            ("10.1.2.3", Reach::Private),
            ("172.16.0.1", Reach::Private),
            ("172.31.255.255", Reach::Private),
            ("192.168.1.1", Reach::Private),
            ("100.64.0.1", Reach::Private),
            ("fd00::1", Reach::Private),
            ("64:ff9b::a00:1", Reach::Private),
            ("2002:a9fe:a9fe::1", Reach::LinkLocal),
            ("224.0.0.1", Reach::Reserved),
            ("255.255.255.255", Reach::Reserved),
            ("::7f00:1", Reach::Reserved),
            ("8.8.8.8", Reach::Public),
            ("172.32.0.1", Reach::Public),
            ("2606:4700::1111", Reach::Public),
        ] {
            assert_eq!(Reach::of(ip(text)), reach, "{text}");
        }
    }

    #[test]
    fn mcpx_own_address_is_refused_whatever_the_client_is_pointed_at_or_allows() {
        let own = [at("127.0.0.1:7000")];
        let url = url::Url::parse("http://127.0.0.1:7000/mcp").unwrap();
        let allow: Arc<[Allowed]> = Arc::from(vec![Allowed::parse("127.0.0.0/8").unwrap()]);
        for egress in [Egress::toward(&url).allowing(allow), Egress::trusting()] {
            let refused = egress.judge("127.0.0.1", at("127.0.0.1:7000"), &own).unwrap_err();
            assert!(refused.contains("where mcpx itself listens (127.0.0.1:7000)"), "{refused}");
            assert!(egress.judge("localhost", at("0.0.0.0:7000"), &own).is_err());
            assert!(egress.judge("localhost", at("[::ffff:127.0.0.1]:7000"), &own).is_err());
            assert!(egress.judge("127.0.0.1", at("127.0.0.1:7001"), &own).is_ok());
        }
    }

    #[test]
    fn a_wildcard_listener_owns_its_port_on_every_local_address() {
        for listen in ["0.0.0.0:7000", "[::]:7000"] {
            let own = [at(listen)];
            for addr in ["127.0.0.1:7000", "127.0.0.9:7000", "[::1]:7000", "0.0.0.0:7000", "[::]:7000"] {
                assert_eq!(own_address(at(addr), &own), Some(at(listen)), "{addr} under {listen}");
            }
            assert_eq!(own_address(at("127.0.0.1:7001"), &own), None);
            // A public address of this machine is caught on the connected socket instead.
            assert_eq!(own_address(at("8.8.8.8:7000"), &own), None);
        }
    }

    #[test]
    fn a_learned_destination_may_be_in_the_kind_of_place_its_anchor_is_and_nowhere_else_private() {
        let public = Egress::toward(&url::Url::parse("https://mcp.example.com/mcp").unwrap());
        for (host, addr) in [
            ("127.0.0.1", "127.0.0.1:8080"),
            ("localhost", "[::1]:8080"),
            ("metadata", "169.254.169.254:80"),
            ("intranet.example.com", "10.0.0.5:443"),
            ("rebound.example.com", "192.168.0.1:443"),
            ("mapped", "[::ffff:10.0.0.5]:443"),
            ("multicast", "224.0.0.1:80"),
        ] {
            let refused = public.judge(host, at(addr), &[]).unwrap_err();
            assert!(refused.starts_with(&format!("{host} resolves to ")), "{refused}");
            assert!(refused.contains("mcp.example.com:443 vouches for no such place"), "{refused}");
            assert!(refused.contains("egress.allow"), "{refused}");
        }
        assert!(public.judge("auth.example.com", at("93.184.216.34:443"), &[]).is_ok());

        let local = Egress::toward(&url::Url::parse("http://127.0.0.1:9000/mcp").unwrap());
        assert!(local.judge("127.0.0.1", at("127.0.0.1:9100"), &[]).is_ok());
        assert!(local.judge("localhost", at("[::1]:9100"), &[]).is_ok());
        assert!(local.judge("meta", at("169.254.169.254:80"), &[]).is_err());
        assert!(local.judge("lan", at("192.168.1.1:80"), &[]).is_err());
    }

    #[test]
    fn the_anchor_itself_is_reached_wherever_it_is() {
        let named = Egress::toward(&url::Url::parse("http://localhost:9000/mcp").unwrap());
        assert!(named.judge("127.0.0.1", at("127.0.0.1:9100"), &[]).is_ok(), "localhost is loopback by name");
        let lan = Egress::toward(&url::Url::parse("http://Tools.LAN:8080/mcp").unwrap());
        assert!(lan.judge("tools.lan", at("192.168.1.20:8080"), &[]).is_ok());
        assert!(lan.judge("tools.lan", at("192.168.1.20:8081"), &[]).is_err(), "another port is another place");
        // Whoever owns a name's DNS can make it resolve anywhere: a name unlocks no place.
        assert!(lan.judge("192.168.1.21", at("192.168.1.21:80"), &[]).is_err());
        let evil = Egress::toward(&url::Url::parse("https://evil.example/mcp").unwrap());
        assert!(evil.judge("evil.example", at("127.0.0.1:443"), &[]).is_ok(), "its own host:port, wherever it is");
        assert!(evil.judge("127.0.0.1", at("127.0.0.1:22"), &[]).is_err());
        let no_anchor = Egress::default();
        let refused = no_anchor.judge("10.0.0.1", at("10.0.0.1:80"), &[]).unwrap_err();
        assert!(refused.contains("it was not configured"), "{refused}");
    }

    #[test]
    fn the_user_may_allow_hosts_addresses_and_networks() {
        let allow: Arc<[Allowed]> = Arc::from(vec![
            Allowed::parse("auth.corp").unwrap(),
            Allowed::parse("10.0.0.0/8").unwrap(),
            Allowed::parse("fd00::7").unwrap(),
        ]);
        let egress = Egress::toward(&url::Url::parse("https://mcp.example.com/").unwrap()).allowing(allow);
        assert!(egress.judge("AUTH.corp.", at("172.16.0.2:443"), &[]).is_ok());
        assert!(egress.judge("x", at("10.9.9.9:443"), &[]).is_ok());
        assert!(egress.judge("x", at("[::ffff:10.9.9.9]:443"), &[]).is_ok());
        assert!(egress.judge("x", at("[fd00::7]:443"), &[]).is_ok());
        assert!(egress.judge("x", at("[fd00::8]:443"), &[]).is_err());
        assert!(egress.judge("x", at("172.16.0.2:443"), &[]).is_err());
    }

    #[test]
    fn allowed_entries_parse_or_say_what_they_are_not() {
        assert_eq!(Allowed::parse("10.1.2.3/8").unwrap(), Allowed::Net("10.0.0.0/8".parse().unwrap()));
        assert_eq!(Allowed::parse("[::1]").unwrap(), Allowed::Net("::1/128".parse().unwrap()));
        assert_eq!(Allowed::parse("Auth.Corp.").unwrap(), Allowed::Host("auth.corp".into()));
        for bad in ["", "10.0.0.0/33", "http://x", "a b", "host/8"] {
            assert!(Allowed::parse(bad).unwrap_err().contains("neither a host name"), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn a_connection_to_a_listening_address_is_refused_before_it_is_made() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let _own = listening(addr);
        let mut guarded = Guarded { tcp: HttpConnector::new(), egress: Arc::new(Egress::trusting()) };
        let uri: Uri = format!("http://{addr}/v1/stop").parse().unwrap();
        let Err(refused) = tower_service::Service::call(&mut guarded, uri).await else { panic!("it connected") };
        let refused = refused.to_string();
        assert!(refused.starts_with(&format!("refused to connect: 127.0.0.1 resolves to {addr}")), "{refused}");
        assert!(refused.contains("where mcpx itself listens"), "{refused}");
    }
}
