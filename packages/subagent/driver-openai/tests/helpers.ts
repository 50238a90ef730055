import { Context } from '@dsh/context'
import { type Session, SessionStore, type StoredSessionEvent } from '@dsh/session'
import { type AgentTool, createModelClient, type ModelClient, type ModelClientOptions } from '../src/index.js'

export const TEST_KEY = 'sk-test-7f3a9c2e51d84b6f'

export function newStore(): SessionStore {
  return new SessionStore(new Context())
}

/** A client for the test server; backoff is recorded, never slept. */
export function testClient(
  baseURL: string,
  options: ModelClientOptions = {},
): { client: ModelClient; waits: { attempt: number; retryAfterMs: number | undefined }[] } {
  const waits: { attempt: number; retryAfterMs: number | undefined }[] = []
  const client = createModelClient({
    baseURL,
    apiKey: TEST_KEY,
    model: 'test-model',
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

export function types(session: Session): string[] {
  return session.events.map((event) => event.type)
}

export function ofType(events: readonly StoredSessionEvent[], type: string): unknown[] {
  return events.filter((event) => event.type === type).map((event) => event.data)
}

/** A small real tool: adds two numbers, rejects bad input with a typed-looking error. */
export const addTool: AgentTool = {
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
    if (typeof a !== 'number' || typeof b !== 'number') throw Object.assign(new Error('a and b must be numbers'), {})
    return { text: String(a + b), sum: a + b }
  },
}
