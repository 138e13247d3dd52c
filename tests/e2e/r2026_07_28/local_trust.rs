//! Other local users: a client (`mcpx call`, `mcpx serve`, every CLI command) sends
//! nothing to a daemon socket it cannot trust. The state dir must be this user's and
//! closed to others, the process listening must run as this user, and with no private
//! place to name (no `MCPX_STATE_DIR`, `XDG_RUNTIME_DIR` or `HOME`) the client refuses
//! rather than use a shared folder.

use std::os::unix::fs::PermissionsExt;

use mcpx_e2e::Home;
use mcpx_e2e::planted::{OTHER_UID, Planted};
use serde_json::json;

const SECRET_CALL: [&str; 3] = ["call", "alpha.whoami", r#"{"token":"s3cret"}"#];

fn home() -> Home {
    Home::new(&json!({ "mcpServers": {} }))
}

#[test]
fn a_socket_in_a_state_dir_another_user_owns_is_refused_and_sent_nothing() {
    let home = home();
    let planted = Planted::listen(&home.socket(), 0);
    std::os::unix::fs::chown(home.state_dir(), Some(OTHER_UID), Some(OTHER_UID)).unwrap();
    std::fs::set_permissions(home.state_dir(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let run = home.cli(&SECRET_CALL);
    assert_ne!(run.code, Some(0), "{run}");
    assert!(run.stderr.contains(&format!("belongs to uid {OTHER_UID}")), "the refusal says why:\n{run}");
    let received = planted.received();
    assert!(received.iter().all(|n| *n == 0), "the planted socket received {received:?} bytes");
    assert!(home.daemons().is_empty(), "no daemon was started in another user's dir");
}

#[test]
fn a_socket_in_a_state_dir_others_may_write_to_is_refused_and_sent_nothing() {
    let home = home();
    let planted = Planted::listen(&home.socket(), 0);
    std::fs::set_permissions(home.state_dir(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let run = home.cli(&SECRET_CALL);
    assert_ne!(run.code, Some(0), "{run}");
    assert!(run.stderr.contains("writable by others"), "the refusal says why:\n{run}");
    let received = planted.received();
    assert!(received.iter().all(|n| *n == 0), "the planted socket received {received:?} bytes");
}

#[test]
fn a_daemon_socket_served_by_another_uid_is_refused_and_sent_nothing() {
    let home = home();
    std::fs::set_permissions(home.state_dir(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let planted = Planted::listen(&home.socket(), OTHER_UID);
    for args in [&SECRET_CALL[..], &["status"][..]] {
        let run = home.cli(args);
        assert_ne!(run.code, Some(0), "{run}");
        assert!(
            run.stderr.contains(&format!("served by a process of uid {OTHER_UID}")),
            "the refusal names the uid listening:\n{run}"
        );
    }
    let received = planted.received();
    assert!(received.iter().all(|n| *n == 0), "the socket of uid {OTHER_UID} received {received:?} bytes");
}

#[test]
fn with_no_state_dir_runtime_dir_or_home_a_client_refuses_instead_of_using_tmp() {
    let home = home();
    let output = home
        .mcpx()
        .arg("status")
        .env_remove("MCPX_STATE_DIR")
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("XDG_STATE_HOME")
        .env_remove("HOME")
        .output()
        .expect("run mcpx status");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "mcpx status ran with no private state dir:\n{stdout}{stderr}");
    assert!(stderr.contains("MCPX_STATE_DIR"), "the refusal says what to set:\n{stderr}");
    assert!(!stdout.contains("/tmp"), "{stdout}");
}
