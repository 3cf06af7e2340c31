#!/usr/bin/env node
// Reference oracle for goai differential conformance tests.
//
// Usage: node runner.mjs [--format sse|ndjson] [--adapter-log] SCENARIO.json
//
// Runs the scenario through the reference TanStack AI `chat()` (pinned
// @tanstack/ai 0.58.0) with a scripted adapter and writes the exact bytes of
// `toServerSentEventsStream` (default) or `toHttpStream` (--format ndjson) to
// stdout. When the scenario uses the `log_hooks` middleware, one stderr line
// `HOOKS: <json array>` is printed after the stream has closed. With
// --adapter-log, one more stderr line `ADAPTER: <json array>` lists every
// adapter call (chatStream / structuredOutput) with the options the engine
// passed (messages without createdAt, tool names, systemPrompts, ids).
//
// Exit codes: 0 ok; 2 usage/scenario error; 3 chat() threw synchronously
// (stderr line `THROW: <message>`); 4 the byte stream itself failed.
//
// The engine's always-on devtools client keeps Node alive ~1.5 s, so the
// process exits explicitly once the output is flushed.

import { readFileSync } from 'node:fs'
import {
  chat,
  maxIterations,
  toolDefinition,
  toServerSentEventsStream,
  toHttpStream,
} from '@tanstack/ai'
import { toolCacheMiddleware } from '@tanstack/ai/middlewares'
import { Console } from 'node:console'

// stdout carries only the stream bytes. The engine's default logger (errors
// category) writes through console.error *and* console.dir, and console.dir
// goes to stdout, so every console method is routed to stderr.
{
  const toStderr = new Console({ stdout: process.stderr, stderr: process.stderr })
  for (const m of ['log', 'info', 'debug', 'warn', 'error', 'dir', 'dirxml', 'trace', 'table']) {
    console[m] = toStderr[m].bind(toStderr)
  }
}

// ---------------------------------------------------------------- arguments
let format = 'sse'
let adapterLog = false
let scenarioPath
{
  const argv = process.argv.slice(2)
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--format') format = argv[++i]
    else if (a.startsWith('--format=')) format = a.slice('--format='.length)
    else if (a === '--adapter-log') adapterLog = true
    else if (!scenarioPath) scenarioPath = a
    else usage(`unexpected argument ${a}`)
  }
  if (!scenarioPath) usage('missing SCENARIO.json')
  if (format !== 'sse' && format !== 'ndjson') usage(`bad --format ${format}`)
}

function usage(msg) {
  process.stderr.write(`runner: ${msg}\nusage: node runner.mjs [--format sse|ndjson] [--adapter-log] SCENARIO.json\n`)
  process.exit(2)
}

let scenario
try {
  scenario = JSON.parse(readFileSync(scenarioPath, 'utf8'))
} catch (err) {
  usage(`cannot read scenario: ${err.message}`)
}

// ------------------------------------------------------------ hook logging
const hooks = []
const adapterCalls = []
// The engine hands every hook the same mutable context object for the whole
// run; the tool execution context does not expose it, so log_hooks keeps the
// reference it last saw and tools read phase/iteration from it.
let runCtx
const logging = (scenario.middleware ?? []).includes('log_hooks')

function record(hook, ctx, detail) {
  if (ctx) runCtx = ctx
  const entry = { hook, phase: ctx?.phase, iteration: ctx?.iteration }
  if (detail !== undefined) entry.detail = detail
  hooks.push(entry)
}

function recordToolExecute(toolName, toolCallId, args) {
  if (!logging) return
  hooks.push({
    hook: 'tool:execute',
    phase: runCtx?.phase,
    iteration: runCtx?.iteration,
    detail: { toolName, toolCallId, args },
  })
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

// ------------------------------------------------------------ tool catalogue
const catalogue = {
  add: toolDefinition({
    name: 'add',
    description: 'Add two numbers.',
    inputSchema: {
      type: 'object',
      properties: { a: { type: 'number' }, b: { type: 'number' } },
      required: ['a', 'b'],
    },
  }).server(async (args, ctx) => {
    recordToolExecute('add', ctx?.toolCallId, args)
    return { sum: args.a + args.b }
  }),
  echo: toolDefinition({
    name: 'echo',
    description: 'Echo the text back.',
    inputSchema: {
      type: 'object',
      properties: { text: { type: 'string' } },
      required: ['text'],
    },
  }).server(async (args, ctx) => {
    recordToolExecute('echo', ctx?.toolCallId, args)
    return args.text
  }),
  fail: toolDefinition({
    name: 'fail',
    description: 'Always fails.',
    inputSchema: { type: 'object', properties: {} },
  }).server(async (args, ctx) => {
    recordToolExecute('fail', ctx?.toolCallId, args)
    throw new Error('tool failed on purpose')
  }),
  sleep: toolDefinition({
    name: 'sleep',
    description: 'Sleep for ms milliseconds.',
    inputSchema: {
      type: 'object',
      properties: { ms: { type: 'integer' } },
      required: ['ms'],
    },
  }).server(async (args, ctx) => {
    recordToolExecute('sleep', ctx?.toolCallId, args)
    await sleep(args.ms)
    return { slept: args.ms }
  }),
  needs_approval: toolDefinition({
    name: 'needs_approval',
    description: 'Does something that needs approval.',
    inputSchema: {
      type: 'object',
      properties: { action: { type: 'string' } },
      required: ['action'],
    },
    needsApproval: true,
  }).server(async (args, ctx) => {
    recordToolExecute('needs_approval', ctx?.toolCallId, args)
    return { done: args.action }
  }),
  client_pick: toolDefinition({
    name: 'client_pick',
    description: 'Let the user pick one of the options.',
    inputSchema: {
      type: 'object',
      properties: { options: { type: 'array', items: { type: 'string' } } },
      required: ['options'],
    },
  }).client(),
}

// ------------------------------------------------------ middleware catalogue
function ids(list) {
  return (list ?? []).map((x) => x.toolCallId)
}

const logHooks = {
  name: 'log_hooks',
  setup(ctx) {
    record('setup', ctx)
  },
  onConfig(ctx, _config) {
    record('onConfig', ctx)
  },
  onStructuredOutputConfig(ctx, _config) {
    record('onStructuredOutputConfig', ctx)
  },
  onStart(ctx) {
    record('onStart', ctx)
  },
  onIteration(ctx, info) {
    record('onIteration', ctx, { iteration: info.iteration })
  },
  onShouldContinue(ctx, state) {
    record('onShouldContinue', ctx, {
      iterationCount: state.iterationCount,
      finishReason: state.finishReason ?? null,
      toolCallCount: state.toolCallCount,
    })
  },
  onChunk(ctx, chunk) {
    record('onChunk', ctx, { type: chunk.type })
  },
  onBeforeToolCall(ctx, hookCtx) {
    record('onBeforeToolCall', ctx, { toolName: hookCtx.toolName, toolCallId: hookCtx.toolCallId })
  },
  onAfterToolCall(ctx, info) {
    record('onAfterToolCall', ctx, { toolName: info.toolName, toolCallId: info.toolCallId, ok: info.ok })
  },
  onToolPhaseComplete(ctx, info) {
    record('onToolPhaseComplete', ctx, {
      results: ids(info.results),
      needsApproval: ids(info.needsApproval),
      needsClientExecution: ids(info.needsClientExecution),
    })
  },
  onUsage(ctx, usage) {
    record('onUsage', ctx, { totalTokens: usage.totalTokens })
  },
  onFinish(ctx, info) {
    record('onFinish', ctx, { finishReason: info.finishReason ?? null })
  },
  onAbort(ctx, info) {
    record('onAbort', ctx, { reason: info.reason ?? null })
  },
  onError(ctx, info) {
    record('onError', ctx, { message: info.error?.message ?? String(info.error) })
  },
  onInterruptBoundary(ctx) {
    record('onInterruptBoundary', ctx)
  },
  onInterruptResolution(ctx, _resolutions) {
    record('onInterruptResolution', ctx)
  },
}

const middlewareCatalogue = {
  noop: () => ({ name: 'noop', onChunk() {} }),
  upper: () => ({
    name: 'upper',
    onChunk(_ctx, chunk) {
      if (chunk.type === 'TEXT_MESSAGE_CONTENT' && typeof chunk.delta === 'string') {
        return { ...chunk, delta: chunk.delta.toUpperCase() }
      }
    },
  }),
  drop_reasoning: () => ({
    name: 'drop_reasoning',
    onChunk(_ctx, chunk) {
      if (typeof chunk.type === 'string' && chunk.type.startsWith('REASONING_')) return null
    },
  }),
  cache: () => toolCacheMiddleware(),
  skip_add: () => ({
    name: 'skip_add',
    onBeforeToolCall(_ctx, hookCtx) {
      if (hookCtx.toolName === 'add') return { type: 'skip', result: { sum: 42 } }
    },
  }),
  abort_on_fail: () => ({
    name: 'abort_on_fail',
    onBeforeToolCall(_ctx, hookCtx) {
      if (hookCtx.toolName === 'fail') return { type: 'abort', reason: 'fail blocked' }
    },
  }),
  args_double: () => ({
    name: 'args_double',
    onBeforeToolCall(_ctx, hookCtx) {
      if (hookCtx.toolName === 'add') {
        return {
          type: 'transformArgs',
          args: { ...hookCtx.args, a: hookCtx.args.a * 2, b: hookCtx.args.b * 2 },
        }
      }
    },
  }),
  log_hooks: () => logHooks,
}

// ------------------------------------------------------------ the adapter
function snapshotMessages(messages) {
  return JSON.parse(
    JSON.stringify(messages ?? [], (key, value) => (key === 'createdAt' ? undefined : value)),
  )
}

const turns = scenario.turns ?? []
let turnIndex = 0

const adapter = {
  kind: 'text',
  name: 'scripted',
  model: 'scripted-1',
  '~types': {},
  async *chatStream(opts) {
    const n = turnIndex++
    if (adapterLog) {
      adapterCalls.push({
        call: 'chatStream',
        turn: n,
        messages: snapshotMessages(opts.messages),
        tools: (opts.tools ?? []).map((t) => t.name),
        systemPrompts: opts.systemPrompts,
        threadId: opts.threadId,
        runId: opts.runId,
        parentRunId: opts.parentRunId,
        ...(opts.outputSchema ? { outputSchema: opts.outputSchema } : {}),
      })
    }
    if (n >= turns.length) {
      yield { type: 'RUN_ERROR', message: 'script exhausted' }
      return
    }
    for (const item of turns[n]) {
      if (item && typeof item === 'object' && !('type' in item) && 'delayMs' in item) {
        await sleep(item.delayMs)
        continue
      }
      // Fresh copy: the engine may keep references to the chunks it sees.
      yield JSON.parse(JSON.stringify(item))
    }
  },
  async structuredOutput(opts) {
    if (adapterLog) {
      adapterCalls.push({
        call: 'structuredOutput',
        messages: snapshotMessages(opts.chatOptions?.messages),
        systemPrompts: opts.chatOptions?.systemPrompts,
        threadId: opts.chatOptions?.threadId,
        runId: opts.chatOptions?.runId,
        outputSchema: opts.outputSchema,
      })
    }
    const s = scenario.structured
    if (!s) throw new Error('no structured result scripted')
    if (s.error !== undefined) throw new Error(s.error)
    const raw = s.raw
    let data
    try {
      data = JSON.parse(raw)
    } catch {
      // Same wording and truncation marker as the engine's own parse failure
      // (harvestCombinedStructuredOutput in @tanstack/ai 0.58.0 uses "...").
      const detail = raw.slice(0, 200) + (raw.length > 200 ? '...' : '')
      throw new Error(`Failed to parse structured output as JSON. Content: ${detail}`)
    }
    return { data, rawText: raw, ...(s.usage ? { usage: s.usage } : {}) }
  },
}

// ------------------------------------------------------------ run
function build() {
  const tools = (scenario.tools ?? []).map((name) => {
    const t = catalogue[name]
    if (!t) usage(`unknown tool in scenario: ${name}`)
    return t
  })
  const middleware = (scenario.middleware ?? []).map((name) => {
    const m = middlewareCatalogue[name]
    if (!m) usage(`unknown middleware in scenario: ${name}`)
    return m()
  })
  const options = {
    adapter,
    messages: scenario.messages ?? [],
    tools,
    middleware,
    threadId: scenario.threadId,
  }
  if (scenario.runId !== undefined) options.runId = scenario.runId
  if (scenario.parentRunId !== undefined) options.parentRunId = scenario.parentRunId
  if (scenario.resume !== undefined) options.resume = scenario.resume
  if (scenario.state !== undefined) options.state = scenario.state
  if (scenario.systemPrompts !== undefined) options.systemPrompts = scenario.systemPrompts
  if (scenario.maxIterations !== undefined) options.agentLoopStrategy = maxIterations(scenario.maxIterations)
  if (scenario.outputSchema !== undefined) {
    options.outputSchema = scenario.outputSchema
    options.stream = true
  }
  return options
}

// Writes as a Node server does: write each chunk and wait only when the
// stream asks for it (write returned false: wait for 'drain'). Awaiting every
// write's callback would cost one event-loop round trip per chunk, which no
// real program pays and which would make the reference look slower than it is.
function writeOut(chunk) {
  if (process.stdout.write(chunk)) return undefined
  return new Promise((resolve) => process.stdout.once('drain', resolve))
}

// Resolves once everything written so far has been handed to the OS, so
// process.exit cannot cut the output short.
function flush(stream) {
  return new Promise((resolve) => stream.write('', () => resolve()))
}

async function writeErr(line) {
  process.stderr.write(line)
  await flush(process.stderr)
}

async function main() {
  const options = build()
  let stream
  try {
    stream = chat(options)
  } catch (err) {
    await writeErr(`THROW: ${err?.message ?? String(err)}\n`)
    process.exit(3)
  }
  const body = format === 'ndjson' ? toHttpStream(stream) : toServerSentEventsStream(stream)
  const reader = body.getReader()
  for (;;) {
    const { value, done } = await reader.read()
    if (done) break
    const wait = writeOut(value)
    if (wait) await wait
  }
  await flush(process.stdout)
  // Hook and adapter logs are collected in memory and written once, at the end.
  let log = ''
  if (logging) log += `HOOKS: ${JSON.stringify(hooks)}\n`
  if (adapterLog) log += `ADAPTER: ${JSON.stringify(adapterCalls)}\n`
  if (log) await writeErr(log)
  process.exit(0)
}

main().catch(async (err) => {
  await writeErr(`runner: ${err?.stack ?? String(err)}\n`)
  process.exit(4)
})
