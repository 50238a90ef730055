import { createModelClient, createOpenAISummarizer } from '@dsh/driver-openai'
import { answer, type Reply, startModelServer } from '@dsh/driver-openai/testing'
import { errorBody } from '@dsh/protocol'
import { SessionPersistenceError } from '@dsh/session-persistence'
import { afterEach, describe, expect, it, onTestFinished } from 'vitest'
import { type Stack, type StackOptions, startStack, TOKEN, turn } from './support/stack.js'

// A compaction whose summarizer fails, over real HTTP: the host's stack with
// the OpenAI summarizer against the scripted model server. The caller gets
// the compaction's code and message (what the model server answered, the
// API key blanked out), the operator one log line.

const API_KEY = 'sk-test-apiproxy-4c1e8b7d29a6'

let stack: Stack | undefined
afterEach(async () => {
  await stack?.close()
  stack = undefined
})

/** A stack whose summarizer asks the scripted model server for `replies` (two attempts per request, backoff not slept). */
async function stackWithModel(replies: readonly Reply[], options: StackOptions = {}): Promise<Stack> {
  const server = await startModelServer(replies)
  onTestFinished(() => server.close())
  const client = createModelClient({
    baseURL: server.baseURL,
    apiKey: API_KEY,
    model: 'test-model',
    env: {},
    retry: { maxAttempts: 2, backoff: async () => {} },
  })
  stack = await startStack({ ...options, summarizer: createOpenAISummarizer({ client }) })
  const session = stack.sessions.create({ id: 'talk' })
  for (let t = 1; t <= 3; t++) turn(session, `Question ${t}. With some detail.`)
  return stack
}

async function compact(id: string) {
  const response = await fetch(`${stack!.server.url}/api/sessions/${id}/compact?keep=1`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${TOKEN}` },
  })
  return { status: response.status, body: errorBody.parse(await response.json()) }
}

const compactionEnd = () => stack!.sessions.get('talk')!.events.findLast((e) => e.type === 'compaction/end')?.data

describe('POST /api/sessions/:id/compact when the summarizer fails', () => {
  it("answers 502 COMPACTION_SUMMARIZER_FAILED with the model server's reason, the API key blanked out", async () => {
    const failure: Reply = { kind: 'error', status: 500, message: `upstream exploded (key ${API_KEY})` }
    await stackWithModel([failure, failure])
    const { status, body } = await compact('talk')
    expect(status).toBe(502)
    expect(body.code).toBe('COMPACTION_SUMMARIZER_FAILED')
    expect(body.message).toMatch(
      /^Compaction of session 'talk' failed: The model server failed after 2 attempts \(HTTP 500\): upstream exploded/,
    )
    expect(body.message).toContain('[redacted]')
    expect(body.message).not.toContain(API_KEY)
    expect(compactionEnd()).toMatchObject({ error: expect.stringContaining('HTTP 500') })
  })

  it('answers 502 with the reason for an answer that is not the protocol (garbage) and for an empty summary', async () => {
    const garbage: Reply = { kind: 'raw', contentType: 'text/html', body: ['<html>Bad gateway</html>'] }
    await stackWithModel([garbage, answer(['   '])])
    const first = await compact('talk')
    expect(first.status).toBe(502)
    expect(first.body.code).toBe('COMPACTION_SUMMARIZER_FAILED')
    expect(first.body.message).toMatch(/^Compaction of session 'talk' failed: The model request failed: .+\. The context is unchanged\.$/)
    expect(first.body.message).not.toMatch(/host's log/)

    const empty = await compact('talk')
    expect(empty.status).toBe(502)
    expect(empty.body).toEqual({
      code: 'COMPACTION_SUMMARIZER_FAILED',
      message: "Compaction of session 'talk' failed: the summarizer returned an empty summary. The context is unchanged.",
    })
  })

  it("logs one line per failure under the host's one 'dsh: ' prefix, the error with its message beside it", async () => {
    await stackWithModel([answer([''])])
    expect((await compact('talk')).status).toBe(502)
    expect(stack!.logs).toHaveLength(1)
    const [log] = stack!.logs
    expect(log!.level).toBe('error')
    // A terminal logger replaces the leading 'dsh: ' with its own; nothing after it names dsh again.
    expect(log!.message).toBe('dsh: an HTTP POST request failed with COMPACTION_SUMMARIZER_FAILED.')
    expect((log!.error as Error).message).toContain('empty summary')
  })

  it('answers 503 SESSION_FLUSH_FAILED, path-free, when persistence does not take the compaction (a backend outage)', async () => {
    await stackWithModel([answer(['A summary.'])])
    let down = true
    stack!.ctx.on('session/flush', () => {
      if (down) throw new SessionPersistenceError('SESSION_PERSISTENCE_UNAVAILABLE', 'connect ECONNREFUSED 10.0.0.7:5432')
    })
    const { status, body } = await compact('talk')
    down = false
    expect(status).toBe(503)
    expect(body.code).toBe('SESSION_FLUSH_FAILED')
    expect(body.message).not.toMatch(/ECONNREFUSED|10\.0\.0\.7/)
    expect(compactionEnd()).toMatchObject({ error: expect.stringContaining('Flushing') })
  })
})
