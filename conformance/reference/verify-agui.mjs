#!/usr/bin/env node
// Validates an AG-UI event stream the way an AG-UI client would.
//
// Usage: node verify-agui.mjs [--ndjson] < stream
//
// Reads SSE (default: `data: <json>` frames separated by blank lines; `id:`,
// `event:`, `retry:` and `:` comment lines are ignored) or NDJSON (--ndjson;
// one JSON per line, `{id, chunk}` wrappers unwrapped) from stdin, checks
// every event against the zod `EventSchemas` of @ag-ui/core 1.0.0, then runs
// the whole sequence through `verifyEvents` of @ag-ui/client 1.0.0 (the
// lifecycle checker HttpAgent applies). Prints `OK <n> events` and exits 0,
// otherwise prints the first error and exits 1 (schema) or 2 (sequence);
// exit 3 means the input itself could not be parsed.
//
// rxjs is a dependency of @ag-ui/client (7.8.1, hoisted by npm).

import { EventSchemas } from '@ag-ui/core/schemas'
import { verifyEvents } from '@ag-ui/client'
import { from, lastValueFrom, toArray } from 'rxjs'

const ndjson = process.argv.includes('--ndjson')

async function readStdin() {
  const parts = []
  for await (const chunk of process.stdin) parts.push(chunk)
  return Buffer.concat(parts).toString('utf8')
}

function parseSSE(text) {
  const events = []
  let data = []
  const flush = () => {
    if (data.length > 0) events.push(JSON.parse(data.join('\n')))
    data = []
  }
  for (const rawLine of text.split('\n')) {
    const line = rawLine.endsWith('\r') ? rawLine.slice(0, -1) : rawLine
    if (line === '') {
      flush()
      continue
    }
    if (line.startsWith(':')) continue
    const colon = line.indexOf(':')
    const field = colon < 0 ? line : line.slice(0, colon)
    let value = colon < 0 ? '' : line.slice(colon + 1)
    if (value.startsWith(' ')) value = value.slice(1)
    if (field === 'data') data.push(value)
  }
  flush()
  return events
}

function parseNDJSON(text) {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .map((l) => {
      const v = JSON.parse(l)
      return v && typeof v === 'object' && 'chunk' in v && 'id' in v && !('type' in v) ? v.chunk : v
    })
}

function fail(code, msg) {
  process.stdout.write(`${msg}\n`)
  process.exit(code)
}

const text = await readStdin()
let events
try {
  events = ndjson ? parseNDJSON(text) : parseSSE(text)
} catch (err) {
  fail(3, `PARSE ${err.message}`)
}

const parsed = []
for (const [i, event] of events.entries()) {
  const r = EventSchemas.safeParse(event)
  if (!r.success) {
    const issues = r.error.issues
      .map((iss) => `${iss.path.join('.') || '<root>'}: ${iss.message}`)
      .join('; ')
    fail(1, `SCHEMA event #${i} (${event?.type}): ${issues}`)
  }
  parsed.push(r.data)
}

try {
  const out = await lastValueFrom(from(parsed).pipe(verifyEvents(false), toArray()), { defaultValue: [] })
  process.stdout.write(`OK ${out.length} events\n`)
  process.exit(0)
} catch (err) {
  fail(2, `SEQUENCE ${err?.message ?? String(err)}`)
}
