#!/usr/bin/env node
// Writes conformance/scenarios/NN-name.json. The JSON files are the source of
// truth for the tests; this script only exists so they can be regenerated
// consistently (node make-scenarios.mjs [outDir]). Adapter chunks imitate what
// the real adapters emit (openai-base/anthropic): RUN_STARTED with the
// caller's runId/threadId, `model` on every chunk, TEXT_MESSAGE_START with
// role, TOOL_CALL_START with toolCallName + index, TOOL_CALL_END with the
// parsed `input`, RUN_FINISHED with finishReason and TokenUsage.

import { mkdirSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const outDir = resolve(process.argv[2] ?? join(here, '..', 'scenarios'))
mkdirSync(outDir, { recursive: true })

const M = 'scripted-1'
const T = 'thread-conf'

// ---------------------------------------------------------------- chunk kit
const rs = (runId, threadId = T) => ({ type: 'RUN_STARTED', runId, threadId, model: M })
const usage = (p, c) => ({ promptTokens: p, completionTokens: c, totalTokens: p + c })
const rf = (runId, finishReason, u = usage(10, 5), threadId = T) => ({
  type: 'RUN_FINISHED',
  runId,
  threadId,
  model: M,
  finishReason,
  ...(u ? { usage: u } : {}),
})
const text = (messageId, ...deltas) => [
  { type: 'TEXT_MESSAGE_START', messageId, role: 'assistant', model: M },
  ...deltas.map((delta) => ({ type: 'TEXT_MESSAGE_CONTENT', messageId, delta, model: M })),
  { type: 'TEXT_MESSAGE_END', messageId, model: M },
]
// One complete tool call. `args` is the raw argument text streamed in one or
// two ARGS deltas; `input` (default: JSON.parse(args)) goes on TOOL_CALL_END
// unless input === null, in which case END carries no input (older adapters).
const tool = (toolCallId, toolCallName, args, index, opts = {}) => {
  const { input, parentMessageId, split = true } = opts
  const start = { type: 'TOOL_CALL_START', toolCallId, toolCallName, index, model: M }
  if (parentMessageId) start.parentMessageId = parentMessageId
  const deltas =
    split && args.length > 4 ? [args.slice(0, Math.floor(args.length / 2)), args.slice(Math.floor(args.length / 2))] : [args]
  const end = { type: 'TOOL_CALL_END', toolCallId, model: M }
  if (input !== null) end.input = input !== undefined ? input : JSON.parse(args)
  return [start, ...deltas.map((delta) => ({ type: 'TOOL_CALL_ARGS', toolCallId, delta, model: M })), end]
}
const user = (content) => ({ role: 'user', content })

const scenarios = []
const add = (name, s) => scenarios.push({ name, threadId: T, ...s })

// ------------------------------------------------------------------ 01-09 text
add('01-plain-text', {
  runId: 'run-1',
  messages: [user('Say hello')],
  tools: [],
  middleware: ['log_hooks'],
  turns: [[rs('run-1'), ...text('msg_a1', 'Hello', ', world', '!'), rf('run-1', 'stop', usage(5, 3))]],
})

add('02-cumulative-content', {
  runId: 'run-1',
  messages: [user('Count')],
  tools: [],
  middleware: ['log_hooks'],
  turns: [
    [
      rs('run-1'),
      { type: 'TEXT_MESSAGE_START', messageId: 'msg_a1', role: 'assistant', model: M },
      { type: 'TEXT_MESSAGE_CONTENT', messageId: 'msg_a1', delta: 'one', content: 'one', model: M },
      { type: 'TEXT_MESSAGE_CONTENT', messageId: 'msg_a1', delta: ' two', content: 'one two', model: M },
      { type: 'TEXT_MESSAGE_CONTENT', messageId: 'msg_a1', delta: ' three', content: 'one two three', model: M },
      { type: 'TEXT_MESSAGE_END', messageId: 'msg_a1', model: M },
      rf('run-1', 'stop'),
    ],
  ],
})

// Cumulative `content` that disagrees with the deltas: history (visible in
// the interrupt MESSAGES_SNAPSHOT) must take the cumulative content.
add('03-cumulative-content-history', {
  runId: 'run-1',
  messages: [user('Pick a colour')],
  tools: ['client_pick'],
  middleware: ['log_hooks'],
  turns: [
    [
      rs('run-1'),
      { type: 'TEXT_MESSAGE_START', messageId: 'msg_a1', role: 'assistant', model: M },
      { type: 'TEXT_MESSAGE_CONTENT', messageId: 'msg_a1', delta: 'Let me ', content: 'Let me ', model: M },
      { type: 'TEXT_MESSAGE_CONTENT', messageId: 'msg_a1', delta: 'ask', content: 'Let me ask you', model: M },
      { type: 'TEXT_MESSAGE_END', messageId: 'msg_a1', model: M },
      ...tool('call_p1', 'client_pick', '{"options":["red","blue"]}', 0),
      rf('run-1', 'tool_calls'),
    ],
  ],
})

add('04-usage-cost-cached', {
  runId: 'run-1',
  messages: [user('Hi')],
  tools: [],
  middleware: ['log_hooks'],
  turns: [
    [
      rs('run-1'),
      ...text('msg_a1', 'Hi there'),
      {
        type: 'RUN_FINISHED',
        runId: 'run-1',
        threadId: T,
        model: M,
        finishReason: 'stop',
        usage: {
          promptTokens: 120,
          completionTokens: 30,
          totalTokens: 150,
          promptTokensDetails: { cachedTokens: 100, cacheWriteTokens: 20 },
          completionTokensDetails: { reasoningTokens: 12 },
          cost: 0.0042,
          costDetails: { input: 0.003, output: 0.0012 },
          providerUsageDetails: { service_tier: 'default' },
        },
      },
    ],
  ],
})

add('05-reasoning', {
  runId: 'run-1',
  messages: [user('Think, then answer')],
  tools: [],
  middleware: ['log_hooks'],
  turns: [
    [
      rs('run-1'),
      { type: 'REASONING_START', messageId: 'rsn_1', model: M },
      { type: 'REASONING_MESSAGE_START', messageId: 'rsn_1', role: 'reasoning', model: M },
      { type: 'REASONING_MESSAGE_CONTENT', messageId: 'rsn_1', delta: 'Let me think', model: M },
      { type: 'REASONING_MESSAGE_CONTENT', messageId: 'rsn_1', delta: ' about it.', model: M },
      { type: 'REASONING_MESSAGE_END', messageId: 'rsn_1', model: M },
      { type: 'REASONING_END', messageId: 'rsn_1', model: M },
      ...text('msg_a1', 'The answer is 4.'),
      rf('run-1', 'stop', {
        promptTokens: 10,
        completionTokens: 20,
        totalTokens: 30,
        completionTokensDetails: { reasoningTokens: 15 },
      }),
    ],
  ],
})

// Anthropic-style: legacy STEP_STARTED/STEP_FINISHED bracketing the
// reasoning, signature on STEP_FINISHED -> REASONING_ENCRYPTED_VALUE fan-out.
const signedReasoning = [
  { type: 'STEP_STARTED', stepName: 'thinking', stepId: 'step_1', stepType: 'thinking', model: M },
  { type: 'REASONING_START', messageId: 'rsn_1', model: M },
  { type: 'REASONING_MESSAGE_START', messageId: 'rsn_1', role: 'reasoning', model: M },
  { type: 'REASONING_MESSAGE_CONTENT', messageId: 'rsn_1', delta: 'I should add.', model: M },
  { type: 'REASONING_MESSAGE_END', messageId: 'rsn_1', model: M },
  { type: 'REASONING_END', messageId: 'rsn_1', model: M },
  {
    type: 'STEP_FINISHED',
    stepName: 'thinking',
    stepId: 'step_1',
    stepType: 'thinking',
    signature: 'sig-abc123',
    content: 'I should add.',
    model: M,
  },
]

add('06-reasoning-step-signature', {
  runId: 'run-1',
  messages: [user('Think, then answer')],
  tools: [],
  middleware: ['log_hooks'],
  turns: [[rs('run-1'), ...signedReasoning, ...text('msg_a1', 'Done thinking.'), rf('run-1', 'stop')]],
})

// Signed thinking lands on the assistant tool-call message; the client tool
// interrupt's MESSAGES_SNAPSHOT shows it as a reasoning row.
add('07-reasoning-signature-snapshot', {
  runId: 'run-1',
  messages: [user('Think, then ask me')],
  tools: ['client_pick'],
  middleware: ['log_hooks'],
  turns: [
    [
      rs('run-1'),
      ...signedReasoning,
      ...tool('call_p1', 'client_pick', '{"options":["a","b"]}', 0, { parentMessageId: 'msg_a1' }),
      rf('run-1', 'tool_calls'),
    ],
  ],
})

add('08-timestamps-present', {
  runId: 'run-1',
  messages: [user('Hi')],
  tools: [],
  middleware: [],
  turns: [
    [
      { ...rs('run-1'), timestamp: 1764670000000 },
      { type: 'TEXT_MESSAGE_START', messageId: 'msg_a1', role: 'assistant', model: M, timestamp: 1764670000001 },
      { type: 'TEXT_MESSAGE_CONTENT', messageId: 'msg_a1', delta: 'Hi', model: M, timestamp: 1764670000002 },
      { type: 'TEXT_MESSAGE_END', messageId: 'msg_a1', model: M, timestamp: 1764670000003 },
      { ...rf('run-1', 'stop'), timestamp: 1764670000004 },
    ],
  ],
})

add('09-finish-reason-in-metadata', {
  runId: 'run-1',
  messages: [user('Hi')],
  tools: ['add'],
  middleware: ['log_hooks'],
  turns: [
    [
      rs('run-1'),
      ...text('msg_a1', 'Truncated answ'),
      {
        type: 'RUN_FINISHED',
        runId: 'run-1',
        threadId: T,
        metadata: { tanstack: { finishReason: 'length', model: M } },
        usage: usage(10, 4096),
      },
    ],
  ],
})

// ------------------------------------------------------------------ 10-19 tools
add('10-server-tool-then-text', {
  runId: 'run-1',
  messages: [user('What is 2+3?')],
  tools: ['add'],
  middleware: ['log_hooks'],
  turns: [
    [rs('run-1'), ...text('msg_a1', 'Let me add.'), ...tool('call_1', 'add', '{"a":2,"b":3}', 0), rf('run-1', 'tool_calls')],
    [rs('run-1'), ...text('msg_a2', '2+3 is 5.'), rf('run-1', 'stop', usage(30, 6))],
  ],
})

// No TEXT_MESSAGE_START and no parentMessageId in the tool turn: the
// TOOL_CALL_RESULT messageId is the engine's own msg-… id.
add('11-two-tools-one-turn', {
  runId: 'run-1',
  messages: [user('Add and echo')],
  tools: ['add', 'echo'],
  middleware: ['log_hooks'],
  turns: [
    [
      rs('run-1'),
      ...tool('call_1', 'add', '{"a":1,"b":2}', 0),
      ...tool('call_2', 'echo', '{"text":"hi"}', 1),
      rf('run-1', 'tool_calls'),
    ],
    [rs('run-1'), ...text('msg_a2', 'Sum 3, echo hi.'), rf('run-1', 'stop')],
  ],
})

add('12-interleaved-tool-calls', {
  runId: 'run-1',
  messages: [user('Two at once')],
  tools: ['add', 'echo'],
  middleware: ['log_hooks'],
  turns: [
    [
      rs('run-1'),
      { type: 'TOOL_CALL_START', toolCallId: 'call_1', toolCallName: 'echo', index: 0, parentMessageId: 'msg_a1', model: M },
      { type: 'TOOL_CALL_START', toolCallId: 'call_2', toolCallName: 'add', index: 1, parentMessageId: 'msg_a1', model: M },
      { type: 'TOOL_CALL_ARGS', toolCallId: 'call_2', delta: '{"a":10,', model: M },
      { type: 'TOOL_CALL_ARGS', toolCallId: 'call_1', delta: '{"text":', model: M },
      { type: 'TOOL_CALL_ARGS', toolCallId: 'call_2', delta: '"b":20}', model: M },
      { type: 'TOOL_CALL_ARGS', toolCallId: 'call_1', delta: '"x"}', model: M },
      { type: 'TOOL_CALL_END', toolCallId: 'call_2', input: { a: 10, b: 20 }, model: M },
      { type: 'TOOL_CALL_END', toolCallId: 'call_1', input: { text: 'x' }, model: M },
      rf('run-1', 'tool_calls'),
    ],
    [rs('run-1'), ...text('msg_a2', 'ok'), rf('run-1', 'stop')],
  ],
})

add('13-unknown-tool', {
  runId: 'run-1',
  messages: [user('Use a tool that does not exist')],
  tools: ['add'],
  middleware: ['log_hooks'],
  turns: [
    [rs('run-1'), ...tool('call_1', 'nonexistent', '{"q":1}', 0), rf('run-1', 'tool_calls')],
    [rs('run-1'), ...text('msg_a2', 'That tool is unknown.'), rf('run-1', 'stop')],
  ],
})

add('14-bad-json-args', {
  runId: 'run-1',
  messages: [user('Broken args')],
  tools: ['add'],
  middleware: ['log_hooks'],
  turns: [
    [rs('run-1'), ...tool('call_1', 'add', '{"a":1,"b":', 0, { input: null }), rf('run-1', 'tool_calls')],
    [rs('run-1'), ...text('msg_a2', 'Args were bad.'), rf('run-1', 'stop')],
  ],
})

add('15-empty-and-null-args', {
  runId: 'run-1',
  messages: [user('No args')],
  tools: ['echo'],
  middleware: ['log_hooks'],
  turns: [
    [
      rs('run-1'),
      { type: 'TOOL_CALL_START', toolCallId: 'call_1', toolCallName: 'echo', index: 0, model: M },
      { type: 'TOOL_CALL_END', toolCallId: 'call_1', model: M },
      { type: 'TOOL_CALL_START', toolCallId: 'call_2', toolCallName: 'echo', index: 1, model: M },
      { type: 'TOOL_CALL_ARGS', toolCallId: 'call_2', delta: 'null', model: M },
      { type: 'TOOL_CALL_END', toolCallId: 'call_2', model: M },
      { type: 'TOOL_CALL_START', toolCallId: 'call_3', toolCallName: 'echo', index: 2, model: M },
      { type: 'TOOL_CALL_ARGS', toolCallId: 'call_3', delta: '  ', model: M },
      { type: 'TOOL_CALL_END', toolCallId: 'call_3', model: M },
      rf('run-1', 'tool_calls'),
    ],
    [rs('run-1'), ...text('msg_a2', 'done'), rf('run-1', 'stop')],
  ],
})

add('16-failing-tool', {
  runId: 'run-1',
  messages: [user('Try the failing tool')],
  tools: ['fail', 'add'],
  middleware: ['log_hooks'],
  turns: [
    [rs('run-1'), ...tool('call_1', 'fail', '{}', 0), ...tool('call_2', 'add', '{"a":1,"b":1}', 1), rf('run-1', 'tool_calls')],
    [rs('run-1'), ...text('msg_a2', 'It failed, but 1+1=2.'), rf('run-1', 'stop')],
  ],
})

const alwaysTool = (n, runId = 'run-1') =>
  Array.from({ length: n }, (_, i) => [
    rs(runId),
    ...tool(`call_${i + 1}`, 'add', `{"a":${i},"b":1}`, 0),
    rf(runId, 'tool_calls'),
  ])

add('17-max-iterations-2', {
  runId: 'run-1',
  messages: [user('Keep adding')],
  tools: ['add'],
  middleware: ['log_hooks'],
  maxIterations: 2,
  turns: alwaysTool(4),
})

add('18-default-iteration-cap', {
  runId: 'run-1',
  messages: [user('Keep adding forever')],
  tools: ['add'],
  middleware: ['log_hooks'],
  turns: alwaysTool(7),
})

add('19-tool-call-end-input', {
  runId: 'run-1',
  messages: [user('Input wins over streamed args')],
  tools: ['add'],
  middleware: ['log_hooks'],
  turns: [
    [
      rs('run-1'),
      // streamed args say 1+1 but END.input says 40+2: the engine must use input
      ...tool('call_1', 'add', '{"a":1,"b":1}', 0, { input: { b: 2, a: 40 } }),
      rf('run-1', 'tool_calls'),
    ],
    [rs('run-1'), ...text('msg_a2', '42'), rf('run-1', 'stop')],
  ],
})

// ------------------------------------------------------------------ 20-24 errors
add('20-adapter-run-error', {
  runId: 'run-1',
  messages: [user('Fail please')],
  tools: ['add'],
  middleware: ['log_hooks'],
  turns: [
    [
      rs('run-1'),
      ...text('msg_a1', 'Partial'),
      {
        type: 'RUN_ERROR',
        runId: 'run-1',
        threadId: T,
        model: M,
        message: 'rate limited',
        code: 'rate_limit',
        error: { message: 'rate limited', code: 'rate_limit' },
      },
    ],
  ],
})

add('21-script-exhausted', {
  runId: 'run-1',
  messages: [user('Add then stop')],
  tools: ['add'],
  middleware: ['log_hooks'],
  turns: [[rs('run-1'), ...tool('call_1', 'add', '{"a":1,"b":2}', 0), rf('run-1', 'tool_calls')]],
})

add('22-run-error-after-tool', {
  runId: 'run-1',
  messages: [user('Tool then failure')],
  tools: ['add'],
  middleware: ['log_hooks'],
  turns: [
    [rs('run-1'), ...tool('call_1', 'add', '{"a":3,"b":4}', 0), rf('run-1', 'tool_calls')],
    [rs('run-1'), { type: 'RUN_ERROR', runId: 'run-1', threadId: T, model: M, error: { message: 'upstream 500', code: 'server_error' } }],
  ],
})

add('23-echo-json-string-result', {
  runId: 'run-1',
  messages: [user('Echo JSON-looking strings')],
  tools: ['echo'],
  middleware: ['log_hooks'],
  turns: [
    [
      rs('run-1'),
      ...tool('call_1', 'echo', '{"text":" {\\"x\\": 1} "}', 0),
      ...tool('call_2', 'echo', '{"text":"42"}', 1),
      ...tool('call_3', 'echo', '{"text":"plain words"}', 2),
      rf('run-1', 'tool_calls'),
    ],
    [rs('run-1'), ...text('msg_a2', 'echoed'), rf('run-1', 'stop')],
  ],
})

add('24-no-run-id', {
  messages: [user('No runId given')],
  tools: ['client_pick'],
  middleware: ['log_hooks'],
  turns: [
    [
      rs('run-adapter-own'),
      ...tool('call_p1', 'client_pick', '{"options":["x","y"]}', 0),
      rf('run-adapter-own', 'tool_calls'),
    ],
  ],
})

// ------------------------------------------------------------ 25-34 middleware
const toolThenText = (toolName, args) => [
  [rs('run-1'), ...text('msg_a1', 'Working on it.'), ...tool('call_1', toolName, args, 0), rf('run-1', 'tool_calls')],
  [rs('run-1'), ...text('msg_a2', 'All done here.'), rf('run-1', 'stop')],
]

add('25-mw-noop', {
  runId: 'run-1',
  messages: [user('Add 2 and 2')],
  tools: ['add'],
  middleware: ['noop', 'log_hooks'],
  turns: toolThenText('add', '{"a":2,"b":2}'),
})

add('26-mw-upper', {
  runId: 'run-1',
  messages: [user('Shout')],
  tools: ['add'],
  middleware: ['upper', 'log_hooks'],
  turns: toolThenText('add', '{"a":2,"b":2}'),
})

add('27-mw-drop-reasoning', {
  runId: 'run-1',
  messages: [user('Think quietly')],
  tools: [],
  middleware: ['drop_reasoning', 'log_hooks'],
  turns: [[rs('run-1'), ...signedReasoning, ...text('msg_a1', 'Quiet answer.'), rf('run-1', 'stop')]],
})

add('28-mw-cache-repeated', {
  runId: 'run-1',
  messages: [user('Add the same thing three times')],
  tools: ['add'],
  middleware: ['cache', 'log_hooks'],
  turns: [
    [rs('run-1'), ...tool('call_1', 'add', '{"a":5,"b":6}', 0), rf('run-1', 'tool_calls')],
    // same args, same key order: cache hit (skip, no tool:execute)
    [rs('run-1'), ...tool('call_2', 'add', '{"a":5,"b":6}', 0), rf('run-1', 'tool_calls')],
    // same args, other key order: the reference misses (key = JSON of args as received)
    [rs('run-1'), ...tool('call_3', 'add', '{"b":6,"a":5}', 0), rf('run-1', 'tool_calls')],
    [rs('run-1'), ...text('msg_a4', '11, thrice.'), rf('run-1', 'stop')],
  ],
})

add('29-mw-cache-failure-not-cached', {
  runId: 'run-1',
  messages: [user('Fail twice')],
  tools: ['fail'],
  middleware: ['cache', 'log_hooks'],
  turns: [
    [rs('run-1'), ...tool('call_1', 'fail', '{}', 0), rf('run-1', 'tool_calls')],
    [rs('run-1'), ...tool('call_2', 'fail', '{}', 0), rf('run-1', 'tool_calls')],
    [rs('run-1'), ...text('msg_a3', 'Failed twice.'), rf('run-1', 'stop')],
  ],
})

add('30-mw-skip-add', {
  runId: 'run-1',
  messages: [user('Add 1 and 1')],
  tools: ['add', 'echo'],
  middleware: ['log_hooks', 'skip_add'],
  turns: [
    [rs('run-1'), ...tool('call_1', 'add', '{"a":1,"b":1}', 0), ...tool('call_2', 'echo', '{"text":"still runs"}', 1), rf('run-1', 'tool_calls')],
    [rs('run-1'), ...text('msg_a2', 'The sum is 42?'), rf('run-1', 'stop')],
  ],
})

add('31-mw-abort-on-fail', {
  runId: 'run-1',
  messages: [user('Add then fail')],
  tools: ['add', 'fail'],
  middleware: ['log_hooks', 'abort_on_fail'],
  turns: [
    [rs('run-1'), ...text('msg_a1', 'Trying.'), ...tool('call_1', 'add', '{"a":1,"b":2}', 0), ...tool('call_2', 'fail', '{}', 1), rf('run-1', 'tool_calls')],
    [rs('run-1'), ...text('msg_a2', 'never reached'), rf('run-1', 'stop')],
  ],
})

add('32-mw-args-double', {
  runId: 'run-1',
  messages: [user('Add 3 and 4')],
  tools: ['add'],
  middleware: ['args_double', 'log_hooks'],
  turns: toolThenText('add', '{"a":3,"b":4}'),
})

// First non-void onBeforeToolCall wins: skip_add before args_double means
// args_double and log_hooks are never asked for `add`; onAfterToolCall runs
// for all.
add('33-mw-combo-first-wins', {
  runId: 'run-1',
  messages: [user('Add 3 and 4, loudly')],
  tools: ['add', 'echo'],
  middleware: ['upper', 'skip_add', 'args_double', 'cache', 'log_hooks'],
  turns: [
    [rs('run-1'), ...text('msg_a1', 'adding'), ...tool('call_1', 'add', '{"a":3,"b":4}', 0), ...tool('call_2', 'echo', '{"text":"quiet"}', 1), rf('run-1', 'tool_calls')],
    [rs('run-1'), ...tool('call_3', 'echo', '{"text":"quiet"}', 0), rf('run-1', 'tool_calls')],
    [rs('run-1'), ...text('msg_a3', 'done, all of it'), rf('run-1', 'stop')],
  ],
})

add('34-mw-drop-then-upper-order', {
  runId: 'run-1',
  messages: [user('Think and speak')],
  tools: ['add'],
  middleware: ['log_hooks', 'drop_reasoning', 'upper', 'noop'],
  turns: [
    [rs('run-1'), ...signedReasoning, ...text('msg_a1', 'let me add'), ...tool('call_1', 'add', '{"a":1,"b":1}', 0), rf('run-1', 'tool_calls')],
    [rs('run-1'), ...text('msg_a2', 'it is two'), rf('run-1', 'stop')],
  ],
})

// ------------------------------------------------------------ 35-39 interrupts
add('35-client-tool-interrupt', {
  runId: 'run-1',
  messages: [user('Let me choose')],
  tools: ['client_pick', 'add'],
  middleware: ['log_hooks'],
  turns: [
    [
      rs('run-1'),
      ...text('msg_a1', 'Pick one:'),
      ...tool('call_p1', 'client_pick', '{"options":["tea","coffee"]}', 0),
      rf('run-1', 'tool_calls'),
    ],
    [rs('run-1'), ...text('msg_a2', 'must not be called'), rf('run-1', 'stop')],
  ],
})

add('36-approval-with-sibling', {
  runId: 'run-1',
  messages: [user('Deploy and add')],
  tools: ['needs_approval', 'add'],
  middleware: ['log_hooks'],
  turns: [
    [
      rs('run-1'),
      ...text('msg_a1', 'Need approval first.'),
      ...tool('call_n1', 'needs_approval', '{"action":"deploy"}', 0),
      ...tool('call_a1', 'add', '{"a":1,"b":2}', 1),
      rf('run-1', 'tool_calls'),
    ],
    [rs('run-1'), ...text('msg_a2', 'must not be called'), rf('run-1', 'stop')],
  ],
})

add('37-state-interrupt', {
  runId: 'run-1',
  messages: [user('Choose with state')],
  state: { step: 2, cart: ['apple'], nested: { ok: true } },
  tools: ['client_pick'],
  middleware: ['log_hooks'],
  turns: [
    [rs('run-1'), ...tool('call_p1', 'client_pick', '{"options":["a"]}', 0, { parentMessageId: 'msg_a1' }), rf('run-1', 'tool_calls')],
  ],
})

// Server tool + client tool in one turn (no approval gating): the server
// tool runs, its result is emitted, then the run pauses on the client tool.
add('38-server-and-client-tool', {
  runId: 'run-1',
  messages: [user('Add then ask')],
  tools: ['add', 'client_pick'],
  middleware: ['log_hooks'],
  turns: [
    [
      rs('run-1'),
      ...tool('call_a1', 'add', '{"a":2,"b":2}', 0, { parentMessageId: 'msg_a1' }),
      ...tool('call_p1', 'client_pick', '{"options":["4","5"]}', 1, { parentMessageId: 'msg_a1' }),
      rf('run-1', 'tool_calls'),
    ],
  ],
})

add('39-approval-interrupt-with-state', {
  runId: 'run-1',
  messages: [user('Deploy')],
  state: { env: 'prod' },
  systemPrompts: ['You are careful.'],
  tools: ['needs_approval'],
  middleware: ['log_hooks'],
  turns: [[rs('run-1'), ...tool('call_n1', 'needs_approval', '{"action":"deploy"}', 0), rf('run-1', 'tool_calls')]],
})

// ------------------------------------------------------------ 40-48 resume
const approvalHistory = (calls) => [
  user('Deploy it'),
  {
    role: 'assistant',
    content: 'Need approval first.',
    id: 'msg_a1',
    toolCalls: calls.map(([id, name, args]) => ({ id, type: 'function', function: { name, arguments: args } })),
  },
]
const afterResume = [[rs('run-2'), ...text('msg_b1', 'Resumed and finished.'), rf('run-2', 'stop')]]

add('40-resume-approve', {
  runId: 'run-2',
  parentRunId: 'run-1',
  resume: [{ interruptId: 'approval_call_n1', status: 'resolved', payload: true }],
  messages: approvalHistory([['call_n1', 'needs_approval', '{"action":"deploy"}']]),
  tools: ['needs_approval', 'add'],
  middleware: ['log_hooks'],
  turns: afterResume,
})

add('41-resume-deny', {
  runId: 'run-2',
  parentRunId: 'run-1',
  resume: [{ interruptId: 'approval_call_n1', status: 'resolved', payload: false }],
  messages: approvalHistory([['call_n1', 'needs_approval', '{"action":"deploy"}']]),
  tools: ['needs_approval'],
  middleware: ['log_hooks'],
  turns: afterResume,
})

add('42-resume-cancel', {
  runId: 'run-2',
  parentRunId: 'run-1',
  resume: [{ interruptId: 'approval_call_n1', status: 'cancelled' }],
  messages: approvalHistory([['call_n1', 'needs_approval', '{"action":"deploy"}']]),
  tools: ['needs_approval'],
  middleware: ['log_hooks'],
  turns: afterResume,
})

add('43-resume-edited-args', {
  runId: 'run-2',
  parentRunId: 'run-1',
  resume: [
    { interruptId: 'approval_call_n1', status: 'resolved', payload: { approved: true, editedArgs: { action: 'rollback' } } },
  ],
  messages: approvalHistory([['call_n1', 'needs_approval', '{"action":"deploy"}']]),
  tools: ['needs_approval'],
  middleware: ['log_hooks'],
  turns: afterResume,
})

add('44-resume-missing-parent-run-id', {
  runId: 'run-2',
  resume: [{ interruptId: 'approval_call_n1', status: 'resolved', payload: true }],
  messages: approvalHistory([['call_n1', 'needs_approval', '{"action":"deploy"}']]),
  tools: ['needs_approval'],
  middleware: ['log_hooks'],
  turns: afterResume,
})

add('45-resume-incomplete-batch', {
  runId: 'run-2',
  parentRunId: 'run-1',
  resume: [{ interruptId: 'approval_call_n1', status: 'resolved', payload: true }],
  messages: approvalHistory([
    ['call_n1', 'needs_approval', '{"action":"deploy"}'],
    ['call_n2', 'needs_approval', '{"action":"migrate"}'],
  ]),
  tools: ['needs_approval'],
  middleware: ['log_hooks'],
  turns: afterResume,
})

// Approve one call; the sibling server tool (never run in the paused run)
// runs too when the batch resumes.
add('46-resume-approve-with-sibling', {
  runId: 'run-2',
  parentRunId: 'run-1',
  resume: [{ interruptId: 'approval_call_n1', status: 'resolved', payload: { approved: true } }],
  messages: approvalHistory([
    ['call_n1', 'needs_approval', '{"action":"deploy"}'],
    ['call_a1', 'add', '{"a":1,"b":2}'],
  ]),
  tools: ['needs_approval', 'add'],
  middleware: ['log_hooks', 'args_double'],
  turns: afterResume,
})

add('47-resume-client-tool-result', {
  runId: 'run-2',
  parentRunId: 'run-1',
  resume: [{ interruptId: 'client_tool_call_p1', status: 'resolved', payload: { picked: 'tea' } }],
  messages: [
    user('Let me choose'),
    {
      role: 'assistant',
      content: 'Pick one:',
      id: 'msg_a1',
      toolCalls: [{ id: 'call_p1', type: 'function', function: { name: 'client_pick', arguments: '{"options":["tea","coffee"]}' } }],
    },
  ],
  tools: ['client_pick'],
  middleware: ['log_hooks'],
  turns: afterResume,
})

add('48-resume-unknown-interrupt', {
  runId: 'run-2',
  parentRunId: 'run-1',
  resume: [
    { interruptId: 'approval_call_n1', status: 'resolved', payload: true },
    { interruptId: 'approval_call_zzz', status: 'resolved', payload: true },
  ],
  messages: approvalHistory([['call_n1', 'needs_approval', '{"action":"deploy"}']]),
  tools: ['needs_approval'],
  middleware: ['log_hooks'],
  turns: afterResume,
})

// ------------------------------------------------------------ 49-51 history
add('49-pending-tool-calls-in-history', {
  runId: 'run-2',
  messages: [
    user('Add and echo'),
    {
      role: 'assistant',
      content: null,
      id: 'msg_a1',
      toolCalls: [
        { id: 'call_1', type: 'function', function: { name: 'add', arguments: '{"a":4,"b":5}' } },
        { id: 'call_2', type: 'function', function: { name: 'echo', arguments: '{"text":"again"}' } },
      ],
    },
    { role: 'tool', toolCallId: 'call_2', content: 'again' },
  ],
  tools: ['add', 'echo'],
  middleware: ['log_hooks'],
  turns: [[rs('run-2'), ...text('msg_b1', '4+5=9'), rf('run-2', 'stop')]],
})

add('50-pending-execution-placeholder', {
  runId: 'run-2',
  messages: [
    user('Add'),
    {
      role: 'assistant',
      content: null,
      id: 'msg_a1',
      toolCalls: [{ id: 'call_1', type: 'function', function: { name: 'add', arguments: '{"a":7,"b":8}' } }],
    },
    { role: 'tool', toolCallId: 'call_1', content: '{"approved":true,"pendingExecution":true,"message":"User approved this action"}' },
    user('and then?'),
  ],
  tools: ['add', 'client_pick'],
  middleware: ['log_hooks'],
  turns: [
    [rs('run-2'), ...tool('call_p9', 'client_pick', '{"options":["15"]}', 0, { parentMessageId: 'msg_b1' }), rf('run-2', 'tool_calls')],
  ],
})

add('51-history-answered-not-rerun', {
  runId: 'run-2',
  messages: [
    user('Add'),
    {
      role: 'assistant',
      content: 'Adding.',
      id: 'msg_a1',
      toolCalls: [{ id: 'call_1', type: 'function', function: { name: 'add', arguments: '{"a":1,"b":1}' } }],
    },
    { role: 'tool', toolCallId: 'call_1', content: '{"sum":2}' },
    { role: 'assistant', content: 'It is 2.', id: 'msg_a2' },
    user('Thanks'),
  ],
  tools: ['add'],
  middleware: ['log_hooks'],
  turns: [[rs('run-2'), ...text('msg_b1', 'You are welcome.'), rf('run-2', 'stop')]],
})

// ------------------------------------------------------------ 52-56 structured
const answerSchema = {
  type: 'object',
  properties: {
    answer: { type: 'string' },
    confidence: { type: 'number' },
  },
  required: ['answer'],
}

add('52-structured-no-tools', {
  runId: 'run-1',
  messages: [user('What is 2+2? Answer as JSON.')],
  tools: [],
  middleware: ['log_hooks'],
  outputSchema: answerSchema,
  structured: { raw: '{"answer":"4","confidence":null}', usage: usage(20, 8) },
  turns: [],
})

add('53-structured-with-tools', {
  runId: 'run-1',
  messages: [user('Add 2 and 2, then answer as JSON.')],
  tools: ['add'],
  middleware: ['log_hooks'],
  outputSchema: answerSchema,
  structured: { raw: '{"answer":"4","confidence":0.9}' },
  turns: [
    [rs('run-1'), ...text('msg_a1', 'Adding.'), ...tool('call_1', 'add', '{"a":2,"b":2}', 0), rf('run-1', 'tool_calls')],
    [rs('run-1'), ...text('msg_a2', 'The sum is 4.'), rf('run-1', 'stop')],
  ],
})

add('54-structured-parse-failure', {
  runId: 'run-1',
  messages: [user('Answer as JSON.')],
  tools: [],
  middleware: ['log_hooks'],
  outputSchema: answerSchema,
  structured: {
    raw:
      'Sure! Here is the answer you asked for, but not as JSON: the answer is four, and I am fairly confident about it because two plus two has been four for a very long time, as far as anyone can remember, truly.',
  },
  turns: [],
})

add('55-structured-adapter-error', {
  runId: 'run-1',
  messages: [user('Answer as JSON.')],
  tools: [],
  middleware: ['log_hooks'],
  outputSchema: answerSchema,
  structured: { error: 'provider refused the schema' },
  turns: [],
})

add('56-structured-short-parse-failure', {
  messages: [user('Answer as JSON.')],
  tools: [],
  middleware: [],
  outputSchema: answerSchema,
  structured: { raw: '{"answer": 4' },
  turns: [],
})

// ------------------------------------------------------------ 57-58 timing
add('57-delay-ms', {
  runId: 'run-1',
  messages: [user('Slow model, slow tool')],
  tools: ['sleep'],
  middleware: ['log_hooks'],
  turns: [
    [
      rs('run-1'),
      { delayMs: 30 },
      ...tool('call_1', 'sleep', '{"ms":50}', 0),
      { delayMs: 20 },
      rf('run-1', 'tool_calls'),
    ],
    [rs('run-1'), ...text('msg_a2', 'Slept'), { delayMs: 10 }, rf('run-1', 'stop')],
  ],
})

add('58-text-only-with-tools-stop', {
  runId: 'run-1',
  messages: [user('Just talk')],
  tools: ['add', 'echo'],
  systemPrompts: ['Be brief.', 'Use tools only when needed.'],
  middleware: ['log_hooks'],
  turns: [[rs('run-1'), ...text('msg_a1', 'Talking only.'), rf('run-1', 'stop')]],
})

// RUN_FINISHED without usage: onUsage must not fire for that turn.
add('59-no-usage', {
  runId: 'run-1',
  messages: [user('No usage reported')],
  tools: ['add'],
  middleware: ['log_hooks'],
  turns: [
    [rs('run-1'), ...tool('call_1', 'add', '{"a":1,"b":2}', 0), rf('run-1', 'tool_calls', null)],
    [rs('run-1'), ...text('msg_a2', 'three'), rf('run-1', 'stop', usage(3, 1))],
  ],
})

// A call the adapter already failed (TOOL_CALL_END with state output-error +
// result): set aside, never executed, its result follows the held
// RUN_FINISHED; the sibling call executes normally.
add('60-adapter-failed-tool-call', {
  runId: 'run-1',
  messages: [user('Provider-side failure')],
  tools: ['add', 'echo'],
  middleware: ['log_hooks'],
  turns: [
    [
      rs('run-1'),
      { type: 'TOOL_CALL_START', toolCallId: 'call_1', toolCallName: 'echo', index: 0, model: M },
      { type: 'TOOL_CALL_ARGS', toolCallId: 'call_1', delta: '{"text":"x"}', model: M },
      {
        type: 'TOOL_CALL_END',
        toolCallId: 'call_1',
        input: { text: 'x' },
        state: 'output-error',
        result: '{"error":"provider rejected the call"}',
        model: M,
      },
      ...tool('call_2', 'add', '{"a":2,"b":5}', 1),
      rf('run-1', 'tool_calls'),
    ],
    [rs('run-1'), ...text('msg_a2', 'one failed'), rf('run-1', 'stop')],
  ],
})

// Gemini-style thoughtSignature on TOOL_CALL_START metadata: a tool-call
// REASONING_ENCRYPTED_VALUE fan-out follows the start event.
add('61-tool-call-thought-signature', {
  runId: 'run-1',
  messages: [user('Gemini style')],
  tools: ['add'],
  middleware: ['log_hooks'],
  turns: [
    [
      rs('run-1'),
      {
        type: 'TOOL_CALL_START',
        toolCallId: 'call_1',
        toolCallName: 'add',
        index: 0,
        metadata: { thoughtSignature: 'gem-sig-1' },
        model: M,
      },
      { type: 'TOOL_CALL_ARGS', toolCallId: 'call_1', delta: '{"a":1,"b":1}', model: M },
      { type: 'TOOL_CALL_END', toolCallId: 'call_1', input: { a: 1, b: 1 }, model: M },
      rf('run-1', 'tool_calls'),
    ],
    [rs('run-1'), ...text('msg_a2', 'two'), rf('run-1', 'stop')],
  ],
})

// ------------------------------------------------------- 62-66 issue 17
// Edge cases where 0.58.0 fails silently; the default agui profile must not
// (see ../DIFFERENCES.md). The tanstack profile reproduces 0.58.0.

// The model's only call yields nothing at all.
add('62-empty-turn', {
  runId: 'run-1',
  messages: [user('Say nothing')],
  tools: [],
  middleware: ['log_hooks'],
  turns: [[]],
})

// A tool round trip, then a model call that yields nothing.
add('63-empty-turn-after-tool', {
  runId: 'run-1',
  messages: [user('Add, then say nothing')],
  tools: ['add'],
  middleware: ['log_hooks'],
  turns: [[rs('run-1'), ...tool('call_1', 'add', '{"a":1,"b":2}', 0), rf('run-1', 'tool_calls')], []],
})

// Two text messages in the turn that asks for an approval: the snapshot
// must keep both.
add('64-two-texts-then-approval', {
  runId: 'run-1',
  messages: [user('Deploy in two steps')],
  tools: ['needs_approval'],
  middleware: ['log_hooks'],
  turns: [
    [
      rs('run-1'),
      ...text('msg_a1', 'Step one.'),
      ...text('msg_a2', 'Step two.'),
      ...tool('call_n1', 'needs_approval', '{"action":"deploy"}', 0),
      rf('run-1', 'tool_calls'),
    ],
    [rs('run-1'), ...text('msg_a3', 'Deployed.'), rf('run-1', 'stop')],
  ],
})

// A complete tool call in a turn cut off by the length limit.
add('65-length-tool-call', {
  runId: 'run-1',
  messages: [user('Add at length')],
  tools: ['add'],
  middleware: ['log_hooks'],
  turns: [[rs('run-1'), ...text('msg_a1', 'Adding'), ...tool('call_1', 'add', '{"a":1,"b":2}', 0), rf('run-1', 'length')]],
})

// The model fails inside the structured-output tool loop (path A).
add('66-structured-loop-error', {
  runId: 'run-1',
  messages: [user('Add, then answer as JSON.')],
  tools: ['add'],
  middleware: ['log_hooks'],
  outputSchema: answerSchema,
  structured: { raw: '{"answer":"3"}' },
  turns: [
    [rs('run-1'), ...tool('call_1', 'add', '{"a":1,"b":2}', 0), rf('run-1', 'tool_calls')],
    [rs('run-1'), { type: 'RUN_ERROR', runId: 'run-1', threadId: T, model: M, message: 'upstream 500', code: 'server_error' }],
  ],
})

for (const s of scenarios) {
  writeFileSync(join(outDir, `${s.name}.json`), JSON.stringify(s, null, 2) + '\n')
}
process.stdout.write(`wrote ${scenarios.length} scenarios to ${outDir}\n`)
