// Shared helpers of the real-client tests. The Go test (conformance/clients_test.go)
// sets GOAI_CLIENT_RUNS, a JSON array of runs, one per scenario:
//
//   {"name": "10-server-tool-then-text",
//    "scenario": "/abs/path/10-server-tool-then-text.json",
//    "urls": {"agui-sse": "http://127.0.0.1:PORT/api/chat", ...}}
//
// urls maps a client name (agui-sse, agui-http, agui-http-bare, agui-agent,
// tanstack-sse, tanstack-http) to the POST URL of its own `goai serve
// --model scripted:SCENARIO --wire agui|tanstack`: one server per client run,
// because a scripted server serves the scenario's turns in order across
// requests. A missing name skips that client.
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import http from 'node:http'
import { fileURLToPath } from 'node:url'
import { ChatClient, EventSchemas, fetchHttpStream, fetchServerSentEvents, modelMessagesToUIMessages } from './deps.mjs'

export const runs = JSON.parse(process.env.GOAI_CLIENT_RUNS || '[]').map((r) => ({
  ...r,
  sc: JSON.parse(readFileSync(r.scenario, 'utf8')),
}))

const runner = fileURLToPath(new URL('../reference/runner.mjs', import.meta.url))

// referenceBytes runs the scenario through the reference engine (@tanstack/ai
// 0.58.0) and returns its wire bytes: SSE, or NDJSON for format 'ndjson'.
export function referenceBytes(scenarioPath, format = 'sse') {
  return new Promise((resolve, reject) => {
    const args = [runner, ...(format === 'ndjson' ? ['--format', 'ndjson'] : []), scenarioPath]
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    const out = []
    let err = ''
    child.stdout.on('data', (b) => out.push(b))
    child.stderr.on('data', (b) => { err += b })
    child.on('error', reject)
    child.on('close', (code) => {
      if (code === 2) reject(new Error(`reference runner: exit 2\n${err}`))
      else resolve(Buffer.concat(out))
    })
  })
}

// serveBytes answers every request with the same bytes (a recorded stream).
export async function serveBytes(bytes, contentType) {
  const server = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      res.writeHead(200, { 'content-type': contentType, 'cache-control': 'no-cache' })
      res.end(bytes)
    })
  })
  await new Promise((r) => server.listen(0, '127.0.0.1', r))
  const { port } = server.address()
  return { url: `http://127.0.0.1:${port}/api/chat`, close: () => new Promise((r) => server.close(r)) }
}

// chatInput splits the scenario's messages into the ChatClient's initial UI
// messages and the user text it sends; null when a ChatClient cannot express
// the request (a resume batch, or history that does not end in user text).
export function chatInput(sc) {
  if (sc.resume) return null
  const msgs = sc.messages ?? []
  const last = msgs[msgs.length - 1]
  if (!last || last.role !== 'user' || typeof last.content !== 'string') return null
  const history = msgs.slice(0, -1)
  return { initialMessages: history.length ? modelMessagesToUIMessages(history) : [], content: last.content }
}

// runChatClient sends the scenario's user message with the real ChatClient
// and returns what it built.
export async function runChatClient(url, transport, sc, input, headers) {
  const chunks = []
  const errors = []
  const rec = recordingFetch()
  const opts = { fetchClient: rec.fetch, ...(headers ? { headers } : {}) }
  const client = new ChatClient({
    connection: transport === 'http' ? fetchHttpStream(url, opts) : fetchServerSentEvents(url, opts),
    threadId: sc.threadId,
    initialMessages: input.initialMessages,
    onChunk: (c) => chunks.push(c),
    onError: (e) => errors.push(e?.message ?? String(e)),
  })
  await client.sendMessage(input.content)
  const st = client.getInterruptState()
  const raw = await Promise.all(rec.bodies)
  return {
    wire: raw.flatMap((t) => (/^data:/m.test(t) ? parseSSE(t) : parseNDJSON(t))),
    requests: rec.requests,
    messages: client.getMessages(),
    chunks,
    errors,
    status: client.getStatus(),
    interrupts: st.interrupts.map((i) => ({ id: i.id, reason: i.reason, status: i.status, toolName: i.metadata?.toolName, kind: i.metadata?.kind })),
  }
}

// Generated ids: the clients' and engines' `<prefix>-<ms>-<rand>`, and the
// engines' MESSAGES_SNAPSHOT ids for history messages that came without one
// (`snapshot_<runId>_<i>`; the reference runner's scenario messages have no
// ids, the client's do).
const generated = /\bsnapshot_[^"\s]*_\d+|\b(msg|chat|run|thread|stream|interrupt|fallback)-\d{10,}-[a-z0-9]+/g

// normalize drops times and replaces generated ids by <idN> in order of first
// appearance, so two runs of the same conversation compare equal.
export function normalize(value) {
  const ids = new Map()
  const walk = (v) => {
    if (typeof v === 'string') {
      return v.replace(generated, (m) => {
        if (!ids.has(m)) ids.set(m, `<id${ids.size + 1}>`)
        return ids.get(m)
      })
    }
    if (Array.isArray(v)) return v.map(walk)
    if (v instanceof Date) return '<date>'
    if (v && typeof v === 'object') {
      const out = {}
      for (const k of Object.keys(v).sort()) {
        if (k === 'createdAt' || k === 'timestamp') continue
        out[k] = walk(v[k])
      }
      // metadata.tanstack that only carried createdAt
      if (out.tanstack && typeof out.tanstack === 'object' && Object.keys(out.tanstack).length === 0) delete out.tanstack
      if (out.metadata && typeof out.metadata === 'object' && Object.keys(out.metadata).length === 0) delete out.metadata
      return out
    }
    return v
  }
  return walk(value)
}

// parseSSE and parseNDJSON split raw wire bytes into events.
export function parseSSE(text) {
  const events = []
  let data = []
  const flush = () => {
    if (data.length) events.push(JSON.parse(data.join('\n')))
    data = []
  }
  for (let line of text.split('\n')) {
    if (line.endsWith('\r')) line = line.slice(0, -1)
    if (line === '') { flush(); continue }
    if (line.startsWith(':')) continue
    const i = line.indexOf(':')
    const field = i < 0 ? line : line.slice(0, i)
    let value = i < 0 ? '' : line.slice(i + 1)
    if (value.startsWith(' ')) value = value.slice(1)
    if (field === 'data') data.push(value)
  }
  flush()
  return events
}

// parseNDJSON unwraps the {id, chunk} envelope of durable streams.
export function parseNDJSON(text) {
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => {
      const v = JSON.parse(l)
      return v && typeof v === 'object' && 'chunk' in v && 'id' in v && !('type' in v) ? v.chunk : v
    })
}

// schemaProblems validates events with the zod EventSchemas of @ag-ui/core.
export function schemaProblems(events) {
  const out = []
  events.forEach((ev, i) => {
    const r = EventSchemas.safeParse(ev)
    if (!r.success) {
      out.push(`event #${i} ${ev?.type}: ` + r.error.issues.map((x) => `${x.path.join('.') || '<root>'}: ${x.message}`).join('; '))
    }
  })
  return out
}

// tee wraps fetch so the raw response bytes of every request are kept.
export function recordingFetch(patchBody) {
  const bodies = []
  const requests = []
  const f = async (url, init = {}) => {
    if (patchBody && typeof init.body === 'string') init = { ...init, body: JSON.stringify(patchBody(JSON.parse(init.body))) }
    requests.push({ headers: init.headers, body: typeof init.body === 'string' ? JSON.parse(init.body) : init.body })
    const res = await fetch(url, init)
    const copy = res.clone()
    bodies.push(copy.text())
    return res
  }
  return { fetch: f, bodies, requests }
}

export function types(events) {
  return events.map((e) => e.type).join(',')
}
