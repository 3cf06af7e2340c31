#!/usr/bin/env node
// Drives TanStack AI's own provider adapters (pinned in package.json) for the
// provider differential suite (providers_test.go).
//
// Usage: node runner.mjs CASE.json BASE_URL
//
// CASE.json holds the run input: {api, model, messages, tools, modelOptions,
// systemPrompts, threadId, runId}. api is "openai-responses", "openai-chat",
// "anthropic" or "gemini". The adapter is pointed at BASE_URL (the suite's
// loopback replay server) with a dummy key, chat() runs the input, and the
// exact bytes of toServerSentEventsStream are written to stdout.
//
// Exit codes: 0 ok; 2 usage error; 3 chat() threw.

import { readFileSync } from 'node:fs'
import { Console } from 'node:console'
import { chat, toolDefinition, toServerSentEventsStream } from '@tanstack/ai'
import { createOpenaiChat, createOpenaiChatCompletions } from '@tanstack/ai-openai'
import { createAnthropicChat } from '@tanstack/ai-anthropic'
import { createGeminiChat } from '@tanstack/ai-gemini'

// stdout carries only the stream bytes.
{
  const toStderr = new Console({ stdout: process.stderr, stderr: process.stderr })
  for (const m of ['log', 'info', 'debug', 'warn', 'error', 'dir', 'dirxml', 'trace', 'table']) {
    console[m] = toStderr[m].bind(toStderr)
  }
}

const [casePath, baseURL] = process.argv.slice(2)
if (!casePath || !baseURL) {
  process.stderr.write('usage: node runner.mjs CASE.json BASE_URL\n')
  process.exit(2)
}
const input = JSON.parse(readFileSync(casePath, 'utf8'))
const key = 'sk-dummy-replay-key'

function adapterFor(api, model) {
  // maxRetries mirrors goai's default (2) so a 429 case sends the same
  // number of requests on both sides; the replay server answers with
  // retry-after-ms: 1 so neither waits.
  switch (api) {
    case 'openai-responses':
      return createOpenaiChat(model, key, { baseURL, maxRetries: 2 })
    case 'openai-chat':
      return createOpenaiChatCompletions(model, key, { baseURL, maxRetries: 2 })
    case 'anthropic':
      return createAnthropicChat(model, key, { baseURL, maxRetries: 2 })
    case 'gemini':
      return createGeminiChat(model, key, { baseURL })
  }
  process.stderr.write(`runner: unknown api ${api}\n`)
  process.exit(2)
}

// Tools are client tools (no execute): the run stops after the model's
// turn, so each case is exactly one provider request.
const tools = (input.tools ?? []).map((t) =>
  toolDefinition({ name: t.name, description: t.description, inputSchema: t.inputSchema }),
)

const options = {
  adapter: adapterFor(input.api, input.model),
  messages: input.messages ?? [],
  tools,
  threadId: input.threadId,
  runId: input.runId,
}
if (input.modelOptions) options.modelOptions = input.modelOptions
if (input.systemPrompts) options.systemPrompts = input.systemPrompts

function write(chunk) {
  return new Promise((resolve, reject) => process.stdout.write(chunk, (err) => (err ? reject(err) : resolve())))
}

async function main() {
  let stream
  try {
    stream = chat(options)
  } catch (err) {
    process.stderr.write(`THROW: ${err?.message ?? String(err)}\n`)
    process.exit(3)
  }
  const reader = toServerSentEventsStream(stream).getReader()
  for (;;) {
    const { value, done } = await reader.read()
    if (done) break
    await write(Buffer.from(value))
  }
  // The engine's devtools client keeps Node alive for a while.
  process.exit(0)
}

main().catch((err) => {
  process.stderr.write(`runner: ${err?.stack ?? err}\n`)
  process.exit(3)
})
