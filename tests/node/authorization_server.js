#!/usr/bin/env node
// A real OAuth 2.1 authorization server for the protected-resource tests: oidc-provider
// (pinned by scripts/deps.sh into .deps/oidc), on an ephemeral loopback port.
//
//   node tests/node/authorization_server.js --client NAME:SECRET [--client NAME:SECRET ...]
//
// Every client may use the client_credentials grant, with the scopes `mcp:tools` and
// `mcp:admin`. Resource indicators (RFC 8707) are on: a token requested with
// `resource=URL` is a JWT access token (ES256) whose `aud` is that URL, so the tests ask
// for one for mcpx's resource URL, or for another resource. Each client's tokens have
// `sub` = its client id. A client whose id begins with `opaque` gets opaque tokens
// instead, which only introspection (at `<issuer>/token/introspection`, RFC 7662, by any
// client with its secret) can tell about.
//
// It prints ONE JSON line on stdout once it listens, then serves until killed:
//
//   {"issuer": "http://127.0.0.1:PORT", "token_endpoint": "...",
//    "signing_key": {"kid": "...", "pem": "..."},   the key its tokens are signed with
//    "stranger_key": {"kid": "...", "pem": "..."}}  a key it does not publish
//
// The private keys are printed so that a test can forge tokens the server would sign
// (an expired one) and tokens it would not (an unknown key). Test use only.

import { generateKeyPairSync, randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

function usage(message) {
  process.stderr.write(`authorization_server.js: ${message}\n`);
  process.exit(2);
}

const clients = [];
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === "--client" && i + 1 < argv.length) {
    const [client_id, client_secret] = argv[++i].split(":");
    if (!client_id || !client_secret) usage("--client takes NAME:SECRET");
    clients.push({
      client_id,
      client_secret,
      grant_types: ["client_credentials"],
      redirect_uris: [],
      response_types: [],
      scope: "mcp:tools mcp:admin",
      token_endpoint_auth_method: "client_secret_basic",
    });
  } else {
    usage(`unknown argument ${argv[i]}`);
  }
}
if (clients.length === 0) usage("give at least one --client NAME:SECRET");

const here = dirname(fileURLToPath(import.meta.url));
const deps = process.env.MCPX_OIDC_DEPS || join(here, "..", "..", ".deps", "oidc");
const { default: Provider, errors } = await import(
  pathToFileURL(join(deps, "node_modules", "oidc-provider", "lib", "index.js")).href
);

function keyPair(type, options, alg) {
  const { privateKey } = generateKeyPairSync(type, options);
  const kid = randomUUID();
  const jwk = { ...privateKey.export({ format: "jwk" }), kid, alg, use: "sig" };
  return { jwk, kid, pem: privateKey.export({ format: "pem", type: "pkcs8" }) };
}
const signing = keyPair("ec", { namedCurve: "P-256" }, "ES256");
const stranger = keyPair("ec", { namedCurve: "P-256" }, "ES256");
// ID tokens (unused here) are RS256 by default, and the provider wants a key for them.
const rsa = keyPair("rsa", { modulusLength: 2048 }, "RS256");

const server = createServer();
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients,
  jwks: { keys: [signing.jwk, rsa.jwk] },
  scopes: ["openid", "mcp:tools", "mcp:admin"],
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resourceIndicator, client) => {
        if (!/^https?:\/\//.test(resourceIndicator)) throw new errors.InvalidTarget();
        return {
          scope: "mcp:tools mcp:admin",
          audience: resourceIndicator,
          accessTokenTTL: 300,
          accessTokenFormat: client.clientId.startsWith("opaque") ? "opaque" : "jwt",
          jwt: { sign: { alg: "ES256" } },
        };
      },
    },
  },
});
provider.on("server_error", (ctx, error) => process.stderr.write(`authorization_server.js: ${error.stack}\n`));
server.on("request", provider.callback());

process.stdout.write(
  JSON.stringify({
    issuer,
    token_endpoint: `${issuer}/token`,
    introspection_endpoint: `${issuer}/token/introspection`,
    signing_key: { kid: signing.kid, pem: signing.pem },
    stranger_key: { kid: stranger.kid, pem: stranger.pem },
  }) + "\n",
);
