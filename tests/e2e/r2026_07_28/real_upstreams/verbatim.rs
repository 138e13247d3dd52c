//! Pass-through mode relays what mcpx does not know: a tool definition with `execution`,
//! vendor `x-…` keys, `_meta`, `icons`, nested unknown keys in its schemas and
//! annotations reaches a 2026-07-28 caller unchanged (only renamed `<server>__<tool>`),
//! from an upstream of either era; and its result comes back as the upstream wrote it.
//! The upstream is `tests/python/verbatim_tools_server.py`, listing what the test wrote.

use mcpx_e2e::process::TempDir;
use mcpx_e2e::upstreams::verbatim::{assert_listed_verbatim, comparable, config, fixture, write_fixture};
use mcpx_e2e::{Daemon, Modern};
use serde_json::{Map, Value, json};

#[test]
fn unknown_tool_fields_reach_a_modern_caller_unchanged_from_upstreams_of_both_eras() {
    let dir = TempDir::new();
    let tools = write_fixture(dir.path());
    let daemon = Daemon::start(&config(&tools));
    let url = daemon.url();

    let list = Modern::tools_list().send(url);
    assert_listed_verbatim(list.result(), "old");
    assert_listed_verbatim(list.result(), "new");

    // What mcpx_search reports is built from the same definitions.
    let search = Modern::tools_call("mcpx_search", json!({"query": "unusual"})).send(url);
    let found = &search.structured()["tools"];
    assert_eq!(found.as_array().map(Vec::len), Some(2), "{search}");

    let expected = comparable(&fixture()["result"]);
    for server in ["old", "new"] {
        let reply = Modern::tools_call(&format!("{server}__odd"), json!({"q": "x"})).send(url);
        assert_eq!(comparable(reply.result()), expected, "{server}: the result must be relayed verbatim:\n{reply}");
        let via_gateway = Modern::mcpx_call(server, "odd", json!({"q": "x"})).send(url);
        assert_eq!(comparable(via_gateway.result()), expected, "{server} via mcpx_call:\n{via_gateway}");
        let meta: &Map<String, Value> = reply.result()["_meta"].as_object().unwrap();
        assert_eq!(meta["io.modelcontextprotocol/serverInfo"]["name"], "mcpx", "{reply}");
    }
}
