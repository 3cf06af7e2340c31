// Drives a goai MCP server with the official TypeScript SDK client and prints
// what it saw as one JSON object. Usage:
//   node ts-client.mjs http URL      (bearer token in GOAI_MCP_TOKEN)
//   node ts-client.mjs stdio CMD...  (runs CMD as a stdio server)
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [mode, ...rest] = process.argv.slice(2);
const token = process.env.GOAI_MCP_TOKEN ?? "";

function transport(tok) {
  if (mode === "stdio") {
    return new StdioClientTransport({ command: rest[0], args: rest.slice(1), env: process.env, stderr: "inherit" });
  }
  const headers = tok ? { Authorization: `Bearer ${tok}` } : {};
  return new StreamableHTTPClientTransport(new URL(rest[0]), { requestInit: { headers } });
}

const out = {};
const client = new Client({ name: "ts-check", version: "1.0.0" });
await client.connect(transport(token));
out.serverInfo = client.getServerVersion();
out.tools = (await client.listTools()).tools;
out.calls = {};
for (const [name, args] of JSON.parse(process.env.GOAI_MCP_CALLS ?? "[]")) {
  try {
    out.calls[name] = await client.callTool({ name, arguments: args });
  } catch (e) {
    out.calls[name] = { thrown: String(e.message ?? e) };
  }
}
await client.close();

if (mode === "http") {
  // A wrong token must be refused before any MCP handling.
  const wrong = new Client({ name: "ts-check-wrong", version: "1.0.0" });
  try {
    await wrong.connect(transport("0".repeat(48)));
    out.wrongToken = { connected: true };
    await wrong.close();
  } catch (e) {
    out.wrongToken = { code: e.code ?? null, message: String(e.message ?? e) };
  }
  const res = await fetch(rest[0], { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream" }, body: "{}" });
  out.noTokenStatus = res.status;
}
process.stdout.write(JSON.stringify(out));
