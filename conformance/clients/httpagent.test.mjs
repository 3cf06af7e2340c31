// HttpAgent (@ag-ui/client 1.0.0) against `goai serve` on the default agui
// wire. HttpAgent applies the AG-UI client's own lifecycle checker
// (verifyEvents) and field enforcement to the stream, so it is the strict
// protocol-order test: it must accept every stream, tool calls and interrupts
// included. Every event on the wire is also validated with the zod
// EventSchemas of @ag-ui/core 1.0.0, and any "[ag-ui][...]" warning (fields
// the client had to strip or repair) fails the test.
//
// The agent sends the scenario's own messages, state, ids and `resume` batch
// (parentRunId is added to the body: HttpAgent 1.0.0 does not send it). When
// the first run ends in interrupts and the scenario has another turn, the
// agent answers every pending interrupt (approve, or a client-tool result)
// and runs again with `resume`: the second request must be accepted too.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { HttpAgent } from './deps.mjs'
import { parseSSE, recordingFetch, runs, schemaProblems, types } from './lib.mjs'

function aguiMessages(sc) {
  return (sc.messages ?? []).map((m, i) => {
    const id = m.id ?? `m${i + 1}`
    const content = typeof m.content === 'string' || m.content == null ? m.content ?? undefined : m.content
    switch (m.role) {
      case 'tool':
        return { id, role: 'tool', toolCallId: m.toolCallId, content: typeof content === 'string' ? content : JSON.stringify(content ?? '') }
      case 'assistant':
        return { id, role: 'assistant', ...(content !== undefined ? { content } : {}), ...(m.toolCalls ? { toolCalls: m.toolCalls } : {}) }
      default:
        return { id, role: m.role, content: content ?? '' }
    }
  })
}

function warningsDuring() {
  const seen = []
  const orig = console.warn
  console.warn = (...a) => {
    const s = a.map(String).join(' ')
    if (s.includes('[ag-ui]')) seen.push(s)
    else orig(...a)
  }
  return { seen, restore: () => { console.warn = orig } }
}

async function run(agent, rec, params) {
  const before = rec.bodies.length
  const onEvent = []
  let error
  try {
    await agent.runAgent(params, { onEvent: ({ event }) => onEvent.push(event) })
  } catch (e) {
    error = e
  }
  const text = (await Promise.all(rec.bodies.slice(before))).join('')
  return { wire: parseSSE(text), onEvent, error }
}

function checkMessages(agent, wire) {
  const byId = new Map()
  for (const m of agent.messages) byId.set(`${m.role}:${m.id}`, m)
  const text = new Map()
  const args = new Map()
  for (const ev of wire) {
    if (ev.type === 'TEXT_MESSAGE_CONTENT') text.set(ev.messageId, (text.get(ev.messageId) ?? '') + ev.delta)
    if (ev.type === 'TOOL_CALL_START') args.set(ev.toolCallId, { name: ev.toolCallName, args: '' })
    if (ev.type === 'TOOL_CALL_ARGS') args.get(ev.toolCallId).args += ev.delta
  }
  // A later MESSAGES_SNAPSHOT replaces the messages (see chatclient.test.mjs).
  for (const ev of wire) {
    if (ev.type !== 'MESSAGES_SNAPSHOT') continue
    for (const m of ev.messages) if (text.has(m.id) && typeof m.content === 'string') text.set(m.id, m.content)
  }
  for (const [id, t] of text) {
    const m = byId.get(`assistant:${id}`)
    assert.ok(m, `no assistant message ${id}`)
    assert.equal(m.content, t, `content of ${id}`)
  }
  const calls = new Map()
  for (const m of agent.messages) for (const c of m.toolCalls ?? []) calls.set(c.id, c)
  for (const [id, { name, args: a }] of args) {
    const c = calls.get(id)
    assert.ok(c, `no toolCalls entry for ${id}`)
    assert.equal(c.function.name, name)
    assert.equal(c.function.arguments, a, `arguments of ${id}`)
  }
  for (const ev of wire.filter((e) => e.type === 'TOOL_CALL_RESULT')) {
    const m = agent.messages.find((x) => x.role === 'tool' && x.toolCallId === ev.toolCallId)
    assert.ok(m, `no tool message for ${ev.toolCallId}`)
    assert.equal(m.content, ev.content)
  }
}

function checkRun(r, label) {
  const ctx = `\n${label} events: ${types(r.wire)}`
  assert.ok(r.wire.length > 0, `no events${ctx}`)
  assert.deepEqual(schemaProblems(r.wire), [], `events rejected by @ag-ui/core EventSchemas${ctx}`)
  const last = r.wire[r.wire.length - 1]
  assert.ok(['RUN_FINISHED', 'RUN_ERROR'].includes(last.type), `stream does not end in a terminal event${ctx}`)
  assert.equal(r.wire.filter((e) => e.type === 'RUN_STARTED').length, 1, `RUN_STARTED count${ctx}`)
  if (r.error) {
    // A run that ends in RUN_ERROR makes runAgent reject with that error; any
    // other rejection is the client refusing the stream.
    assert.equal(last.type, 'RUN_ERROR', `HttpAgent rejected the stream: ${r.error?.message ?? r.error}${ctx}`)
  }
  assert.equal(r.onEvent.length, r.wire.length, `HttpAgent delivered ${r.onEvent.length} of ${r.wire.length} events${ctx}`)
  assert.deepEqual(r.onEvent.map((e) => e.type), r.wire.map((e) => e.type), `HttpAgent saw another sequence${ctx}`)
}

function answer(intr) {
  const kind = intr.metadata?.kind
  if (kind === 'client_tool') return { interruptId: intr.id, status: 'resolved', payload: { picked: 'tea' } }
  return { interruptId: intr.id, status: 'resolved', payload: { approved: true } }
}

for (const { name, sc: scenario, urls } of runs) describe(name, () => {
  test(`${name}: HttpAgent accepts the agui stream`, { skip: urls['agui-agent'] ? false : 'no server for this client' }, async (t) => {
    let parentRunId = scenario.parentRunId
    const rec = recordingFetch((body) => (parentRunId ? { ...body, parentRunId } : body))
    const agent = new HttpAgent({ url: urls['agui-agent'], threadId: scenario.threadId, fetch: rec.fetch })
    agent.messages = aguiMessages(scenario)
    if (scenario.state) agent.state = scenario.state
    const w = warningsDuring()
    try {
      const runId = scenario.runId ?? 'run-client-1'
      const first = await run(agent, rec, { runId, ...(scenario.resume ? { resume: scenario.resume } : {}) })
      t.diagnostic(`first run: ${types(first.wire)}`)
      checkRun(first, 'first run')
      checkMessages(agent, first.wire)
      const fin = first.wire.at(-1)
      const interrupts = fin.type === 'RUN_FINISHED' && fin.outcome?.type === 'interrupt' ? fin.outcome.interrupts : []
      assert.deepEqual(agent.pendingInterrupts.map((i) => i.id), interrupts.map((i) => i.id), 'pendingInterrupts of the agent')
      if (interrupts.length > 0 && scenario.turns.length > 1) {
        parentRunId = runId
        const second = await run(agent, rec, { runId: 'run-client-2', resume: interrupts.map(answer) })
        t.diagnostic(`resumed run: ${types(second.wire)}`)
        checkRun(second, 'resumed run')
        checkMessages(agent, second.wire)
        assert.equal(second.error, undefined, `resumed run failed: ${second.error?.message}`)
        assert.deepEqual(agent.pendingInterrupts, [], 'interrupts still pending after resume')
      }
      assert.deepEqual(w.seen, [], 'the AG-UI client warned about the stream')
    } finally {
      w.restore()
    }
  })
})
