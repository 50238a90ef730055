import { Context } from '@dsh/context'
import type { MessagesRequestBody, ModelServer, RecordedRequest } from '@dsh/driver-openai/testing'
import { type Session, SessionStore, type StoredSessionEvent } from '@dsh/session'
import type { SubagentTool } from '@dsh/subagent'
import { type AnthropicClient, type AnthropicClientOptions, createAnthropicClient } from '../src/index.js'

export const TEST_KEY = 'sk-ant-test-4c1e9b7d2a6f'

export function newStore(): SessionStore {
  return new SessionStore(new Context())
}

/** The Messages API's base URL on the test server: its origin (the SDK adds `/v1/messages`). */
export function messagesURL(server: ModelServer): string {
  return new URL(server.baseURL).origin
}

/** A client for the test server; backoff is recorded, never slept. */
export function testClient(
  server: ModelServer,
  options: AnthropicClientOptions = {},
): { client: AnthropicClient; waits: { attempt: number; retryAfterMs: number | undefined }[] } {
  const waits: { attempt: number; retryAfterMs: number | undefined }[] = []
  const client = createAnthropicClient({
    baseURL: messagesURL(server),
    apiKey: TEST_KEY,
    model: 'claude-test',
    env: {},
    ...options,
    retry: {
      maxAttempts: 3,
      backoff: async (attempt, retryAfterMs) => {
        waits.push({ attempt, retryAfterMs })
      },
      ...options.retry,
    },
  })
  return { client, waits }
}

/** The Messages body of a recorded request. */
export function bodyOf(request: RecordedRequest | undefined): MessagesRequestBody {
  if (request === undefined) throw new Error('no such request')
  return request.body as unknown as MessagesRequestBody
}

export function types(session: Session): string[] {
  return session.events.map((event) => event.type)
}

export function ofType(events: readonly StoredSessionEvent[], type: string): unknown[] {
  return events.filter((event) => event.type === type).map((event) => event.data)
}

/** A small real tool: adds two numbers, rejects anything else. */
export const addTool: SubagentTool = {
  name: 'add',
  description: 'Add two numbers a and b.',
  jsonSchema: {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'object',
    properties: { a: { type: 'number' }, b: { type: 'number' } },
    required: ['a', 'b'],
    additionalProperties: false,
  },
  async execute(input) {
    const { a, b } = input as { a: unknown; b: unknown }
    if (typeof a !== 'number' || typeof b !== 'number') throw new Error('a and b must be numbers')
    return { text: String(a + b), sum: a + b }
  },
}
