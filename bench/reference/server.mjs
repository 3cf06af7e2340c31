#!/usr/bin/env node
// The reference side of bench/serve-vs-reference.sh: @tanstack/ai 0.58.0
// served the way its documentation serves it, `toServerSentEventsResponse(chat(...))`,
// bridged to node:http as a Node server does (write each chunk, wait only on
// 'drain', abort the run when the client goes away).
//
// Usage: node server.mjs SCENARIO.json [PORT]
//
// The model is the same scripted model goai serves with `--model
// scripted:SCENARIO.json`: turn N of the scenario on its N-th call across all
// requests, `{"delayMs": n}` items pause, `"cycle": true` starts the turns over
// after the last one, `"stampYield": true` sets each chunk's timestamp to the
// time it is yielded. Tools: `add {a,b} -> {sum}`. Prints
// `reference serving on http://127.0.0.1:PORT` once it listens.

import http from 'node:http'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { chat, maxIterations, toolDefinition, toServerSentEventsResponse } from '@tanstack/ai'

const [scenarioPath, portArg] = process.argv.slice(2)
if (!scenarioPath) {
  process.stderr.write('usage: node server.mjs SCENARIO.json [PORT]\n')
  process.exit(2)
}
const scenario = JSON.parse(readFileSync(scenarioPath, 'utf8'))
const turns = scenario.turns ?? []

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let calls = 0
const adapter = {
  kind: 'text',
  name: 'scripted',
  model: 'scripted-1',
  '~types': {},
  async *chatStream() {
    let n = calls++
    if (scenario.cycle && turns.length > 0) n %= turns.length
    if (n >= turns.length) {
      yield { type: 'RUN_ERROR', message: 'script exhausted' }
      return
    }
    for (const item of turns[n]) {
      if (!('type' in item) && 'delayMs' in item) {
        if (item.delayMs > 0) await sleep(item.delayMs)
        continue
      }
      const chunk = { ...item }
      if (scenario.stampYield) chunk.timestamp = Date.now()
      yield chunk
    }
  },
  async structuredOutput() {
    throw new Error('no structured output in the benchmark')
  },
}

const add = toolDefinition({
  name: 'add',
  description: 'Add two numbers.',
  inputSchema: {
    type: 'object',
    properties: { a: { type: 'number' }, b: { type: 'number' } },
    required: ['a', 'b'],
  },
}).server(async (args) => ({ sum: args.a + args.b }))

async function readBody(req) {
  const parts = []
  for await (const p of req) parts.push(p)
  return JSON.parse(Buffer.concat(parts).toString('utf8'))
}

const server = http.createServer(async (req, res) => {
  if (req.method !== 'POST' || !req.url.startsWith('/api/chat')) {
    res.writeHead(404).end()
    return
  }
  let input
  try {
    input = await readBody(req)
  } catch (err) {
    res.writeHead(400, { 'content-type': 'text/plain' }).end(`bad body: ${err.message}`)
    return
  }
  const abortController = new AbortController()
  res.on('close', () => {
    if (!res.writableFinished) abortController.abort()
  })
  const options = {
    adapter,
    messages: (input.messages ?? []).map((m) => ({ role: m.role, content: m.content })),
    tools: (scenario.tools ?? []).includes('add') ? [add] : [],
    threadId: input.threadId,
    runId: input.runId,
    abortController,
  }
  if (scenario.maxIterations !== undefined) options.agentLoopStrategy = maxIterations(scenario.maxIterations)
  const response = toServerSentEventsResponse(chat(options), { abortController })
  res.writeHead(response.status, Object.fromEntries(response.headers))
  try {
    for await (const chunk of response.body) {
      if (res.destroyed) break
      if (!res.write(chunk)) await Promise.race([once(res, 'drain'), once(res, 'close')])
    }
  } catch {
    // the client went away: the abort above stops the run
  }
  res.end()
})
server.keepAliveTimeout = 5000
server.listen(Number(portArg ?? 0), '127.0.0.1', () => {
  const { port } = server.address()
  process.stdout.write(`reference serving on http://127.0.0.1:${port}\n`)
})
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(0))
