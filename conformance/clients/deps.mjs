// The pinned client packages, loaded from conformance/reference/node_modules
// (see resolve-hook.mjs); `npm ci` there first (scripts/test.sh does).
import { register } from 'node:module'

register('./resolve-hook.mjs', import.meta.url)

export const { ChatClient, fetchServerSentEvents, fetchHttpStream } = await import('@tanstack/ai-client')
export const { modelMessagesToUIMessages } = await import('@tanstack/ai/client')
export const { HttpAgent } = await import('@ag-ui/client')
export const { EventSchemas } = await import('@ag-ui/core/schemas')
